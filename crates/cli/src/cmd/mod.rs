//! One module per subcommand.

pub mod impair;
pub mod nc;
pub mod run;
pub mod serve;
pub mod ss;
pub mod stat;
