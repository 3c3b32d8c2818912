"""A Python gRPC client (grpcio, Debian's python3-grpcio) calling a node's admin API over
TLS, run by tests/suite/admin_tls.rs: grpcio insists that the server selects ALPN `h2`,
which a TLS server without it fails.

usage: admin_tls_client.py PROTO_DIR HOST:PORT TOKEN CA_FILE [CERT_FILE KEY_FILE]

Prints `operations <count>` when ListOperations answers, else `refused <status code>`.
"""

import importlib
import sys
import tempfile

from grpc_tools import protoc
import grpc


def main():
    proto_dir, target, token, ca = sys.argv[1:5]
    cert_key = sys.argv[5:7]
    with tempfile.TemporaryDirectory() as out:
        protoc.main(["grpc_tools.protoc", f"-I{proto_dir}", f"--python_out={out}",
                     f"--grpc_python_out={out}", f"{proto_dir}/admin.proto"])
        sys.path.insert(0, out)
        pb = importlib.import_module("admin_pb2")
        rpc = importlib.import_module("admin_pb2_grpc")
        read = lambda path: open(path, "rb").read()
        chain, key = (read(cert_key[0]), read(cert_key[1])) if cert_key else (None, None)
        creds = grpc.ssl_channel_credentials(read(ca), private_key=key, certificate_chain=chain)
        channel = grpc.secure_channel(target, creds)
        auth = [("authorization", f"Bearer {token}")]
        try:
            ops = rpc.AdminStub(channel).ListOperations(
                pb.ListOperationsRequest(), metadata=auth, timeout=10)
            print(f"operations {len(ops.operations)}")
        except grpc.RpcError as e:
            print(f"refused {e.code().name}")


if __name__ == "__main__":
    main()
