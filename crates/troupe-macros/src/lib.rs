//! `#[derive(Message)]` for the troupe actor runtime (re-exported as `troupe::Message`).
//!
//! ```ignore
//! use troupe::Message;
//!
//! #[derive(Message)]                 // impl Message for Add { type Reply = (); }
//! struct Add(u64);
//!
//! #[derive(Message)]
//! #[reply(Result<u64, String>)]      // impl Message for Get { type Reply = Result<u64, String>; }
//! struct Get;
//! ```

#![deny(missing_docs)]

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, DeriveInput, Type};

/// Implements `troupe::Message`. The reply type is `()` unless a `#[reply(T)]` attribute
/// names it.
#[proc_macro_derive(Message, attributes(reply))]
pub fn derive_message(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let mut reply: Option<Type> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("reply")) {
        if reply.is_some() {
            return Err(syn::Error::new_spanned(
                attr,
                "one #[reply(..)] attribute: the message has one reply type",
            ));
        }
        reply = Some(attr.parse_args::<Type>().map_err(|e| {
            syn::Error::new(
                e.span(),
                "#[reply(..)] takes the reply type, for example #[reply(u64)]",
            )
        })?);
    }
    let reply = reply.map_or_else(|| quote!(()), |ty| quote!(#ty));
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::troupe::Message for #name #ty_generics #where_clause {
            type Reply = #reply;
        }
    })
}
