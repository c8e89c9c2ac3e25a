%% Erlang/OTP peer for troupe-bench: the scenarios of peers/PROTOCOL.md
%% (ring, spawn, counter, chain) written with plain Erlang processes and
%% message passing, the way the seed write-ups used them.
%%
%% Usage (see the `run` launcher):
%%   erl -noshell -pa ebin -s bench_peer main -extra <scenario> [options]
%%
%% Results go to stdout as JSON Lines (one object per metric); progress and
%% diagnostics go to stderr.
-module(bench_peer).
-export([main/0]).

-define(CONTENDER, "erlang").
%% Give up waiting for a reply after this long: a run that stalls is reported
%% as failed instead of hanging forever.
-define(TIMEOUT, 600000).

%%====================================================================
%% Entry point and command line
%%====================================================================

main() ->
    %% Work in a fresh process rather than in the one that boots the system,
    %% and end the emulator with the run's exit status when it is done.
    spawn(fun() -> erlang:halt(main(init:get_plain_arguments())) end).

main(Args) ->
    try run(Args)
    catch
        throw:{usage, Msg} ->
            err("error: ~s~n~s", [Msg, usage()]),
            2;
        throw:{unsupported, Scenario, Contender} ->
            err("unsupported: ~s for ~s~n", [Scenario, Contender]),
            3;
        Class:Reason:Stack ->
            err("error: ~p:~p~n~p~n", [Class, Reason, Stack]),
            1
    end.

usage() ->
    "usage:\n"
    "  run ring    --actors N --rounds M            [--repeat R] [--warmup W] [--contender erlang]\n"
    "  run spawn   --actors N                       [--repeat R] [--warmup W] [--contender erlang]\n"
    "  run counter --producers P --per-producer K   [--repeat R] [--warmup W] [--contender erlang]\n"
    "  run chain   --length N --mode actors|threads [--repeat R] [--warmup W] [--contender erlang]\n".

run([Scenario | Args]) ->
    Opts = parse_opts(Args, #{}),
    Contender = maps:get("contender", Opts, ?CONTENDER),
    Known = ["ring", "spawn", "counter", "chain"],
    (lists:member(Scenario, Known) andalso Contender =:= ?CONTENDER) orelse
        throw({unsupported, Scenario, Contender}),
    Repeat = int_opt(Opts, "repeat", 1, 1),
    Warmup = int_opt(Opts, "warmup", 0, 0),
    Lines = scenario(Scenario, Opts, Warmup, Repeat),
    [io:put_chars(json(L) ++ "\n") || L <- Lines],
    case lists:all(fun(L) -> proplists:get_value(validated, L) end, Lines) of
        true -> 0;
        false -> 1
    end;
run([]) ->
    throw({usage, "no scenario given"}).

%% "--key value" pairs into a map of strings.
parse_opts([], Acc) ->
    Acc;
parse_opts(["--" ++ Key, Value | Rest], Acc) when Key =/= "" ->
    parse_opts(Rest, Acc#{Key => Value});
parse_opts([Other | _], _) ->
    throw({usage, "bad option " ++ Other}).

%% Integer option with a default (undefined = required) and a lower bound.
int_opt(Opts, Key, Default, Min) ->
    case maps:find(Key, Opts) of
        error when Default =:= undefined -> throw({usage, "missing --" ++ Key});
        error -> Default;
        {ok, Str} ->
            case string:to_integer(Str) of
                {N, ""} when N >= Min -> N;
                _ -> throw({usage, "bad value for --" ++ Key ++ ": " ++ Str})
            end
    end.

%%====================================================================
%% Scenarios: each returns the result lines it measured
%%====================================================================

scenario("ring", Opts, Warmup, Repeat) ->
    N = int_opt(Opts, "actors", undefined, 1),
    M = int_opt(Opts, "rounds", undefined, 1),
    Params = [{actors, N}, {rounds, M}],
    Reps = repeat(Warmup, Repeat, fun(I) -> ring(N, M, I) end),
    Ok = all_ok(Reps),
    Note = "one process per node, token forwarded with !, default schedulers (one per core)",
    [line("ring", "construct", "ms", Params, [C || {C, _, _} <- Reps], Ok, Note),
     line("ring", "throughput", "msgs/s", Params, [T || {_, T, _} <- Reps], Ok, Note)];

scenario("spawn", Opts, Warmup, Repeat) ->
    N = int_opt(Opts, "actors", undefined, 1),
    Params = [{actors, N}],
    %% RSS is taken around the first spawn round this OS process does (the
    %% only one that starts from a fresh heap); later rounds reuse memory the
    %% allocators kept, so they only give the time.
    Reps = repeat(Warmup, Repeat, fun(I) -> spawn_idle(N, I, I =:= 1 - Warmup) end),
    Ok = all_ok(Reps),
    Mem = [get(rss_per_actor)],
    [line("spawn", "spawn_time", "us/actor", Params, [T || {T, _} <- Reps], Ok,
          "spawn/1 of a process that acknowledges its start-up, default process heap, "
          "process limit (+P) raised by the launcher when N needs it"),
     line("spawn", "memory", "bytes/actor", Params, Mem, Ok,
          "VmRSS of the BEAM before/after the first spawn round, no forced GC; "
          ++ erlang_mem_note())];

scenario("counter", Opts, Warmup, Repeat) ->
    P = int_opt(Opts, "producers", erlang:system_info(schedulers_online), 1),
    K = int_opt(Opts, "per-producer", undefined, 1),
    Params = [{producers, P}, {per_producer, K}],
    Reps = repeat(Warmup, Repeat, fun(I) -> counter(P, K, I) end),
    [line("counter", "throughput", "msgs/s", Params, [T || {T, _} <- Reps], all_ok(Reps),
          "counting process with a tail-recursive receive loop and message_queue_data off_heap, "
          "producers are processes, "
          "GetAndReset is a ref-tagged request-reply answered once every producer's done marker is in")];

scenario("chain", Opts, Warmup, Repeat) ->
    N = int_opt(Opts, "length", undefined, 1),
    %% Processes are Erlang's only unit of concurrency, so --mode is accepted
    %% for compatibility and the stages are always processes.
    Mode = maps:get("mode", Opts, "actors"),
    lists:member(Mode, ["actors", "threads"]) orelse
        throw({usage, "bad value for --mode: " ++ Mode}),
    Params = [{length, N}, {mode, list_to_binary(Mode)}],
    Reps = repeat(Warmup, Repeat, fun(I) -> chain(N, I) end),
    [line("chain", "elapsed", "ms", Params, [T || {T, _} <- Reps], all_ok(Reps),
          "one process per stage (--mode ignored: stages are always processes), "
          "unbounded mailboxes")].

%% Runs Warmup unmeasured then Repeat measured repetitions; repetitions are
%% numbered from 1 - Warmup so that measured ones are 1..Repeat. Warm-up
%% results are dropped, but a failed check in a warm-up still fails the run.
repeat(Warmup, Repeat, Fun) ->
    Results = [Fun(I) || I <- lists:seq(1 - Warmup, Repeat)],
    {Warm, Measured} = lists:split(Warmup, Results),
    case all_ok(Warm) of
        true -> Measured;
        false -> [setelement(tuple_size(R), R, false) || R <- Measured]
    end.

%% The last element of every repetition's result is its validation flag.
all_ok(Reps) ->
    lists:all(fun(R) -> element(tuple_size(R), R) end, Reps).

%%--------------------------------------------------------------------
%% ring: N processes in a ring pass one token around M times
%%--------------------------------------------------------------------

ring(N, M, Rep) ->
    Parent = self(),
    T0 = now_ns(),
    %% Node 0 is spawned first and told its successor once the others exist;
    %% nodes N-1 .. 1 are spawned backwards so each knows its successor.
    Origin = spawn(fun() -> receive {connect, Next} -> origin(Next, M, Parent) end end),
    Node1 = lists:foldl(fun(_, Next) -> spawn(fun() -> ring_node(Next, 0) end) end,
                        Origin, lists:seq(N - 1, 1, -1)),
    Origin ! {connect, Node1},
    Construct = ms(now_ns() - T0),
    Origin ! start,
    {Elapsed, Value} = receive {ring_done, E, V} -> {E, V} after ?TIMEOUT -> {1, -1} end,
    Total = receive {ring_count, C} -> C after ?TIMEOUT -> -1 end,
    Throughput = N * M / (Elapsed / 1.0e9),
    Ok = Total =:= N * M andalso Value =:= M,
    progress("ring ~s: construct ~.3f ms, ~b msgs/s, tokens ~b, value ~b~s",
             [rep(Rep), Construct, round(Throughput), Total, Value, check(Ok)]),
    {Construct, Throughput, Ok}.

%% Node 0, the origin: sends the token (origin 0, value 0) to node 1, bumps
%% the value each time the token comes back, and after M rounds reports the
%% time and stops the ring.
origin(Next, M, Parent) ->
    receive
        start ->
            T0 = now_ns(),
            Next ! {token, 0, 0},
            origin(Next, M, Parent, T0, 0)
    end.

origin(Next, M, Parent, T0, Count) ->
    receive
        {token, 0, Value} when Value + 1 =:= M ->
            Parent ! {ring_done, now_ns() - T0, Value + 1},
            %% A stop message goes around once, adding up every node's count
            %% of received tokens, and each node ends as it passes it on.
            Next ! {stop, Count + 1},
            receive {stop, Total} -> Parent ! {ring_count, Total} end;
        {token, 0, Value} ->
            Next ! {token, 0, Value + 1},
            origin(Next, M, Parent, T0, Count + 1)
    end.

%% Any other node: forwards the token and counts it.
ring_node(Next, Count) ->
    receive
        {token, _Origin, _Value} = Token ->
            Next ! Token,
            ring_node(Next, Count + 1);
        {stop, Sum} ->
            Next ! {stop, Sum + Count}
    end.

%%--------------------------------------------------------------------
%% spawn: N idle processes, each acknowledging its start-up
%%--------------------------------------------------------------------

spawn_idle(N, Rep, MeasureMemory) ->
    Parent = self(),
    Before = rss_bytes(),
    Mem0 = erlang:memory(total),
    T0 = now_ns(),
    Pids = [spawn(fun() -> Parent ! started, idle(Parent) end) || _ <- lists:seq(1, N)],
    Started = collect(started, N, 0),
    Elapsed = now_ns() - T0,
    After = rss_bytes(),
    Mem1 = erlang:memory(total),
    Bytes = case MeasureMemory of
                true ->
                    put(rss_per_actor, (After - Before) / N),
                    put(erlang_mem, (Mem1 - Mem0) / N),
                    io_lib:format("~b bytes/actor", [round((After - Before) / N)]);
                false ->
                    "not measured"
            end,
    %% Stop them all and wait until they are gone before the next round.
    [Pid ! stop || Pid <- Pids],
    collect(stopped, N, 0),
    PerActor = Elapsed / 1000 / N,
    Ok = Started =:= N,
    progress("spawn ~s: ~.3f us/actor, started ~b, rss ~s~s",
             [rep(Rep), PerActor, Started, Bytes, check(Ok)]),
    {PerActor, Ok}.

%% An idle process: waits for stop, then confirms it is stopping.
idle(Parent) ->
    receive stop -> Parent ! stopped end.

%% Counts Msg arrivals up to N (fewer if they stop arriving).
collect(_Msg, N, N) ->
    N;
collect(Msg, N, Got) ->
    receive Msg -> collect(Msg, N, Got + 1) after ?TIMEOUT -> Got end.

erlang_mem_note() ->
    case get(erlang_mem) of
        undefined -> "";
        B -> io_lib:format("erlang:memory(total) grew ~b bytes/actor", [round(B)])
    end.

%%--------------------------------------------------------------------
%% counter: P producers each send K {add, 100} to one counting process
%%--------------------------------------------------------------------

counter(P, K, Rep) ->
    Parent = self(),
    %% The counting process gets many messages from several senders: keeping
    %% its queue off the process heap (an OTP option meant for this case)
    %% spares senders a lock on its heap and its GC from copying the queue.
    Counter = spawn_opt(fun() -> counter_loop(0, 0, P, none) end,
                        [{message_queue_data, off_heap}]),
    T0 = now_ns(),
    [spawn(fun() ->
               produce(Counter, K),
               %% Erlang orders messages only per pair of processes: a producer's
               %% last Adds may still be on their way when another process's
               %% get_and_reset arrives. This marker follows the producer's own
               %% Adds on the same pair, so the counter answers only once every
               %% producer's marker, and so every Add, is in.
               Counter ! producer_done,
               Parent ! produced
           end) || _ <- lists:seq(1, P)],
    Finished = collect(produced, P, 0),
    %% Every producer is done: ask for the sum (request-reply).
    Ref = make_ref(),
    Counter ! {get_and_reset, self(), Ref},
    Sum = receive {Ref, S} -> S after ?TIMEOUT -> -1 end,
    Elapsed = now_ns() - T0,
    Counter ! stop,
    Throughput = P * K / (Elapsed / 1.0e9),
    Ok = Finished =:= P andalso Sum =:= P * K * 100,
    progress("counter ~s: ~b msgs/s, sum ~b~s", [rep(Rep), round(Throughput), Sum, check(Ok)]),
    {Throughput, Ok}.

%% State: the sum; Done: producers whose marker has arrived, of P; Pending: a
%% get_and_reset that arrived before every marker, answered when the last comes.
counter_loop(State, Done, P, Pending) ->
    receive
        {add, N} ->
            counter_loop(State + N, Done, P, Pending);
        producer_done when Done + 1 =:= P, Pending =/= none ->
            {From, Ref} = Pending,
            From ! {Ref, State},
            counter_loop(0, 0, P, none);
        producer_done ->
            counter_loop(State, Done + 1, P, Pending);
        {get_and_reset, From, Ref} when Done =:= P ->
            From ! {Ref, State},
            counter_loop(0, 0, P, none);
        {get_and_reset, From, Ref} ->
            counter_loop(State, Done, P, {From, Ref});
        stop ->
            ok
    end.

produce(_Counter, 0) ->
    ok;
produce(Counter, K) ->
    Counter ! {add, 100},
    produce(Counter, K - 1).

%%--------------------------------------------------------------------
%% chain: N stages in a line, N messages 1..N sent through all of them
%%--------------------------------------------------------------------

chain(N, Rep) ->
    Parent = self(),
    %% Build from the sink backwards: stage N is the sink, stages N-1 .. 1
    %% forward to their successor. Building is not timed.
    Sink = spawn(fun() -> sink(Parent, N, 0, 0, undefined) end),
    Stage1 = lists:foldl(fun(_, Next) -> spawn(fun() -> stage(Next) end) end,
                         Sink, lists:seq(1, N - 1)),
    T0 = now_ns(),
    [Stage1 ! {item, I} || I <- lists:seq(1, N)],
    %% The end marker follows the items (messages between two processes keep
    %% their order); it stops the stages and lets the sink report what it got.
    Stage1 ! stop,
    {Count, Sum, TDone} =
        receive {chain_done, C, S, T} -> {C, S, T} after ?TIMEOUT -> {-1, -1, undefined} end,
    Ok = Count =:= N andalso Sum =:= N * (N + 1) div 2 andalso TDone =/= undefined,
    Elapsed = case TDone of undefined -> 0.0; _ -> ms(TDone - T0) end,
    progress("chain ~s: ~.3f ms, received ~b, sum ~b~s", [rep(Rep), Elapsed, Count, Sum, check(Ok)]),
    {Elapsed, Ok}.

stage(Next) ->
    receive
        {item, _} = Item ->
            Next ! Item,
            stage(Next);
        stop ->
            Next ! stop
    end.

%% The sink notes the time it received its N-th message; the stop marker
%% behind the items then tells it nothing else is coming.
sink(Parent, N, Count, Sum, TDone) ->
    receive
        {item, I} when Count + 1 =:= N ->
            sink(Parent, N, Count + 1, Sum + I, now_ns());
        {item, I} ->
            sink(Parent, N, Count + 1, Sum + I, TDone);
        stop ->
            Parent ! {chain_done, Count, Sum, TDone}
    end.

%%====================================================================
%% Results: JSON lines, statistics, machine description
%%====================================================================

line(Scenario, Metric, Unit, Params, Samples, Ok, Notes) ->
    [{scenario, list_to_binary(Scenario)},
     {metric, list_to_binary(Metric)},
     {contender, <<?CONTENDER>>},
     {params, {obj, Params}},
     {unit, list_to_binary(Unit)},
     {median, median(Samples)},
     {min, lists:min(Samples)},
     {max, lists:max(Samples)},
     {samples, Samples},
     {validated, Ok},
     {notes, unicode:characters_to_binary(Notes)},
     {machine, {obj, machine()}}].

median(Samples) ->
    Sorted = lists:sort(Samples),
    Len = length(Sorted),
    case Len rem 2 of
        1 -> lists:nth(Len div 2 + 1, Sorted);
        0 -> (lists:nth(Len div 2, Sorted) + lists:nth(Len div 2 + 1, Sorted)) / 2
    end.

machine() ->
    [{cpu, cpu_model()},
     {cores, erlang:system_info(logical_processors_available)},
     {os, os_name()},
     {runtime, runtime()}].

cpu_model() ->
    case file:read_file("/proc/cpuinfo") of
        {ok, Info} ->
            case re:run(Info, "^model name\\s*:\\s*(.*)$", [multiline, {capture, [1], binary}]) of
                {match, [Model]} -> string:trim(Model);
                nomatch -> <<"unknown">>
            end;
        _ -> <<"unknown">>
    end.

os_name() ->
    {_, Family} = os:type(),
    Kernel = case os:version() of
                 {Ma, Mi, Pa} -> io_lib:format("~b.~b.~b", [Ma, Mi, Pa]);
                 V -> V
             end,
    Distro = case file:read_file("/etc/os-release") of
                 {ok, Rel} ->
                     case re:run(Rel, "^PRETTY_NAME=\"?([^\"\\n]*)", [multiline, {capture, [1], list}]) of
                         {match, [Name]} -> Name ++ ", ";
                         nomatch -> ""
                     end;
                 _ -> ""
             end,
    Kname = case Family of linux -> "Linux"; _ -> atom_to_list(Family) end,
    unicode:characters_to_binary([Distro, Kname, " ", Kernel]).

%% e.g. "Erlang/OTP 25.2.3 erts-13.1.5"
runtime() ->
    Release = erlang:system_info(otp_release),
    File = filename:join([code:root_dir(), "releases", Release, "OTP_VERSION"]),
    Otp = case file:read_file(File) of
              {ok, V} -> string:trim(binary_to_list(V));
              _ -> Release
          end,
    list_to_binary(["Erlang/OTP ", Otp, " erts-", erlang:system_info(version)]).

%% Resident set size of this BEAM OS process, from /proc/<pid>/status.
rss_bytes() ->
    {ok, Status} = file:read_file("/proc/" ++ os:getpid() ++ "/status"),
    {match, [Kb]} = re:run(Status, "^VmRSS:\\s*(\\d+) kB", [multiline, {capture, [1], list}]),
    list_to_integer(Kb) * 1024.

%% A minimal JSON encoder: proplists are objects (keys keep their order),
%% lists are arrays, binaries are strings.
json({obj, Pairs}) ->
    json(Pairs);
json([{_, _} | _] = Pairs) ->
    ["{", lists:join(",", [[json(atom_to_binary(K)), ":", json(V)] || {K, V} <- Pairs]), "}"];
json(true) -> "true";
json(false) -> "false";
json(N) when is_integer(N) -> integer_to_list(N);
json(F) when is_float(F) -> float_to_list(F, [short]);
json(B) when is_binary(B) -> [$", escape(unicode:characters_to_list(B)), $"];
json(L) when is_list(L) -> ["[", lists:join(",", [json(X) || X <- L]), "]"].

escape([]) -> [];
escape([$" | T]) -> [$\\, $" | escape(T)];
escape([$\\ | T]) -> [$\\, $\\ | escape(T)];
escape([C | T]) when C < 16#20 -> [io_lib:format("\\u~4.16.0b", [C]) | escape(T)];
escape([C | T]) -> [C | escape(T)].

%%====================================================================
%% Small helpers
%%====================================================================

now_ns() ->
    erlang:monotonic_time(nanosecond).

ms(Ns) ->
    Ns / 1.0e6.

rep(I) when I < 1 -> "warm-up";
rep(I) -> io_lib:format("rep ~b", [I]).

check(true) -> "";
check(false) -> " VALIDATION FAILED".

progress(Fmt, Args) ->
    err(Fmt ++ "~n", Args).

err(Fmt, Args) ->
    io:format(standard_error, Fmt, Args).
