//! The ACL file's text (`aclfile`): one `user <name> <rules...>` line per user, as ACL SAVE
//! writes it and ACL LOAD reads it back (all or nothing). Only the text: reading and the
//! atomic 0600 write are `server::persistence::acl_file`'s, reached through
//! `node_state::services::AclFile`.

use super::catalog::Catalog;
use super::rules::Rules;
use super::{valid_username, USERS_MAX};
use std::collections::BTreeMap;

/// Parses an ACL file's text. Errors name the file and line, as Redis's do.
pub fn parse(
    text: &str,
    path: &str,
    catalog: &Catalog,
    all_channels_default: bool,
) -> Result<BTreeMap<String, Rules>, String> {
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        if words[0] != "user" || words.len() < 2 {
            errors.push_str(&format!(
                "{path}:{}: line should start with user keyword. ",
                n + 1
            ));
            continue;
        }
        let name = words[1];
        if !valid_username(name.as_bytes()) {
            errors.push_str(&format!(
                "{path}:{}: Usernames can't contain spaces or null characters. ",
                n + 1
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "{path}:{}: Duplicate user '{name}' found. ",
                n + 1
            ));
            continue;
        }
        if users.len() >= USERS_MAX {
            errors.push_str(&format!("{path}:{}: too many users. ", n + 1));
            break;
        }
        // A user of a file starts as a new user does (its channels by acl-pubsub-default);
        // a file without `default` gives it its start-up rules (see `Acl::replace_all`).
        let mut rules = Rules::new(all_channels_default);
        let mut failed = false;
        for op in &words[2..] {
            if let Err(e) = rules.apply(catalog, op, all_channels_default) {
                errors.push_str(&format!(
                    "{path}:{}: Error in user declaration '{name}': {e}. ",
                    n + 1
                ));
                failed = true;
                break;
            }
        }
        if !failed {
            users.insert(name.to_string(), rules);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        Err(errors.trim_end().to_string())
    }
}

/// The file's text for `lines` (one user each, as `Acl::describe_all` gives them).
pub fn render(lines: &[String]) -> String {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}
