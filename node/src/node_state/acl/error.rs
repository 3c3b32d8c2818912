//! Why an ACL rule was refused, with Redis 7.0's texts (ACL SETUSER answers
//! `ERR Error in ACL SETUSER modifier '<rule>': <text>`).

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("Unknown command or category name in ACL")]
    Unknown,
    #[error("Syntax error")]
    Syntax,
    #[error("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")]
    AfterAllKeys,
    #[error("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")]
    AfterAllChannels,
    #[error("The password you are trying to remove from the user does not exist")]
    NoSuchPassword,
    #[error("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")]
    BadHash,
    #[error("Allowing first-arg of a subcommand is not supported")]
    FirstArgOfSubcommand,
    #[error("Selectors are not supported by this node (Redis 7.0's '(...)' rules)")]
    Selectors,
    #[error("too many passwords, patterns or first-args for one user")]
    TooMany,
}
