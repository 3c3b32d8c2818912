//! A node as `operator cluster` talks to it: a TCP client, commands whose reply is text.

use crate::client::{Client, ClientError, ConnectOptions, Target};

pub struct NodeSession {
    pub addr: String,
    client: Client,
}

impl NodeSession {
    /// Connects to `host:port` over TCP, with `password` if given.
    pub async fn open(addr: &str, password: Option<&str>) -> Result<NodeSession, String> {
        let (host, port) = split_addr(addr)?;
        let mut options = ConnectOptions::new(Target::tcp(host, port));
        options.password = password.map(str::to_string);
        let client = Client::connect(&options)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(NodeSession {
            addr: addr.to_string(),
            client,
        })
    }

    /// Runs a command; its reply as text (status, bulk, verbatim, integer), or the error.
    pub async fn text(&mut self, args: &[&str]) -> Result<String, String> {
        let reply = self.client.call(args).await.map_err(|e| match e {
            ClientError::Server(m) => format!("{}: {}: {m}", self.addr, args.join(" ")),
            other => format!("{}: {other}", self.addr),
        })?;
        match reply {
            proto::resp::Frame::Integer(n) => Ok(n.to_string()),
            other => other
                .as_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .ok_or_else(|| format!("{}: unexpected reply to {}", self.addr, args[0])),
        }
    }

    /// A parameter's value (CONFIG GET name), "" when the node does not list it.
    pub async fn config_get(&mut self, name: &str) -> Result<String, String> {
        let reply = self
            .client
            .call(&["CONFIG", "GET", name])
            .await
            .map_err(|e| format!("{}: CONFIG GET {name}: {e}", self.addr))?;
        let value = match reply {
            proto::resp::Frame::Array(items) if items.len() == 2 => items[1]
                .as_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            proto::resp::Frame::Map(pairs) if pairs.len() == 1 => pairs[0]
                .1
                .as_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            _ => None,
        };
        Ok(value.unwrap_or_default())
    }

    /// A field of CLUSTER INFO.
    pub async fn info_field(&mut self, field: &str) -> Result<String, String> {
        let info = self.text(&["CLUSTER", "INFO"]).await?;
        Ok(info
            .lines()
            .find_map(|l| l.trim_end().strip_prefix(field)?.strip_prefix(':'))
            .unwrap_or("")
            .to_string())
    }
}

/// `host:port` (the port after the last colon, so IPv6 hosts work).
pub fn split_addr(addr: &str) -> Result<(String, u16), String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("'{addr}' is not HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("'{addr}': bad port '{port}'"))?;
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::split_addr;

    #[test]
    fn addresses() {
        assert_eq!(
            split_addr("127.0.0.1:7000").unwrap(),
            ("127.0.0.1".into(), 7000)
        );
        assert_eq!(split_addr("[::1]:7000").unwrap(), ("::1".into(), 7000));
        assert!(split_addr("nohost").is_err());
        assert!(split_addr("h:99999").is_err());
    }
}
