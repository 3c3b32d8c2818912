//! The connection to a node's admin API: `--admin HOST:PORT`, `--token`.

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
    let endpoint = Channel::from_shared(format!("http://{}", args.admin))
        .map_err(|e| anyhow::anyhow!("--admin {}: {e}", args.admin))?
        .connect_timeout(std::time::Duration::from_secs(5));
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
