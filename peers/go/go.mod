module troupe/peers/go

go 1.19
