//! The ACL file's I/O, as ACL LOAD, ACL SAVE and the load at start use it (the text's
//! format is `node_state::acl::file`).

use std::path::Path;

pub trait AclFile {
    /// The file's text, or why it could not be read in Redis's words without the `ERR `
    /// (`Error loading ACLs, opening file ...`).
    fn read(&self, path: &Path) -> Result<String, String>;
    /// Replaces the file with `text`: atomically, readable by the node's user only.
    fn write(&self, path: &Path, text: &str) -> std::io::Result<()>;
}
