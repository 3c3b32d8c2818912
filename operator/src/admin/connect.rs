//! The connection to a node's admin API: `--admin HOST:PORT`, `--token`, and TLS
//! (`--tls-ca`, with `--tls-cert`/`--tls-key` for a node that asks for a client certificate).

use proto::admin::v1::admin_client::AdminClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// The flags every admin subcommand takes.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct AdminArgs {
    /// Any node's admin API.
    #[arg(
        long = "admin",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9000"
    )]
    pub admin: String,
    /// The node's `admin-token` (visible to local users in the process list: prefer
    /// --token-file).
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// A file holding the node's `admin-token` (surrounding whitespace ignored).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<std::path::PathBuf>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Speak TLS to the admin API (the node's `admin-tls-cert-file`), trusting the CA
    /// certificate in this PEM file.
    #[arg(long, value_name = "PATH")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// Our certificate (PEM), for a node with `admin-tls-ca-cert-file` (mutual TLS).
    #[arg(long, value_name = "PATH", requires = "tls_key", requires = "tls_ca")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// The name the node's certificate must carry (default: the host of --admin).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
}

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct Bearer(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

pub type Client = AdminClient<InterceptedService<Channel, Bearer>>;

/// Longest token file read: a token, not a document (the node caps `admin-token` at 1024).
const TOKEN_FILE_MAX: u64 = 4096;
/// Longest certificate or key file read (the node reads its own up to 4 MiB).
const PEM_FILE_MAX: u64 = 4 * 1024 * 1024;

fn read_pem(flag: &str, path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(PEM_FILE_MAX + 1).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("reading {flag} {}: {e}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= PEM_FILE_MAX,
        "{flag} {}: larger than {PEM_FILE_MAX} bytes",
        path.display()
    );
    Ok(bytes)
}

/// The TLS settings the flags ask for, or None for plain HTTP/2.
fn tls_config(args: &AdminArgs) -> anyhow::Result<Option<tonic::transport::ClientTlsConfig>> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let Some(ca) = &args.tls_ca else {
        return Ok(None);
    };
    let host = match &args.tls_server_name {
        Some(name) => name.clone(),
        None => host_of(&args.admin).to_string(),
    };
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read_pem("--tls-ca", ca)?))
        .domain_name(host);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        tls = tls.identity(Identity::from_pem(
            read_pem("--tls-cert", cert)?,
            read_pem("--tls-key", key)?,
        ));
    }
    Ok(Some(tls))
}

/// The host part of `HOST:PORT` (`[v6]:port` too).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn token(args: &AdminArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &args.token_file else {
        return Ok(args.token.clone());
    };
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(TOKEN_FILE_MAX).read_to_string(&mut text))
        .map_err(|e| anyhow::anyhow!("reading --token-file {}: {e}", path.display()))?;
    Ok(Some(text.trim().to_string()))
}

pub async fn connect(args: &AdminArgs) -> anyhow::Result<Client> {
    let bearer = match &token(args)? {
        Some(t) if !t.is_empty() => Some(
            format!("Bearer {t}")
                .parse()
                .map_err(|_| anyhow::anyhow!("the token must be printable ASCII"))?,
        ),
        _ => None,
    };
    let tls = tls_config(args)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Channel::from_shared(format!("{scheme}://{}", args.admin))
        .map_err(|e| anyhow::anyhow!("--admin {}: {e}", args.admin))?
        .connect_timeout(std::time::Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| anyhow::anyhow!("--admin {}: TLS settings: {e}", args.admin))?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| anyhow::anyhow!("connecting to the admin API at {}: {e}", args.admin))?;
    Ok(AdminClient::with_interceptor(channel, Bearer(bearer)))
}

/// A gRPC error as a line: its code and message.
pub fn status_text(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}
