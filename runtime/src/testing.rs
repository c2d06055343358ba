//! Test helpers: run one async test body on both tokio runtime flavours.

/// Defines `#[test]` functions that run `body` on a current-thread and on a multi-thread runtime.
macro_rules! both_runtimes {
    ($(async fn $name:ident() $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports, reason = "a test body may use nothing from the enclosing module")]
                use super::*;
                #[test]
                fn current_thread() {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(async $body)
                }
                #[test]
                fn multi_thread() {
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(async $body)
                }
            }
        )*
    };
}
pub(crate) use both_runtimes;
