"""A Python client of the admin API generated from proto/admin.proto by grpcio-tools (Debian's
python3-grpc-tools), run against a node by tests/suite/admin_api.rs.

usage: admin_client.py PROTO_DIR HOST:PORT TOKEN

Prints one line per check: `cluster <state> <version> <node ids, comma-separated>`,
`unauthenticated <code>`, `migrate <state> <slots done>/<slots total> <target id>` (slots
0-99 moved from their owner to another primary, followed with WatchOperation), `again
<same|different>` (the same request_id names the same operation), `operations <count>`.
"""

import importlib
import sys
import tempfile

from grpc_tools import protoc
import grpc


def generate(proto_dir, out_dir):
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{proto_dir}",
            f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            f"{proto_dir}/admin.proto",
        ]
    )
    if rc != 0:
        raise SystemExit(f"protoc failed: {rc}")
    sys.path.insert(0, out_dir)
    return importlib.import_module("admin_pb2"), importlib.import_module("admin_pb2_grpc")


def main():
    proto_dir, target, token = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as out:
        pb, rpc = generate(proto_dir, out)
        channel = grpc.insecure_channel(target)
        admin = rpc.AdminStub(channel)
        auth = [("authorization", f"Bearer {token}")]

        cluster = admin.GetCluster(pb.GetClusterRequest(), metadata=auth, timeout=10)
        state = pb.ClusterState.Name(cluster.state)
        ids = ",".join(n.id for n in cluster.nodes)
        print(f"cluster {state} {cluster.version} {ids}", flush=True)

        try:
            admin.GetCluster(pb.GetClusterRequest(), timeout=10)
            print("unauthenticated none")
        except grpc.RpcError as e:
            print(f"unauthenticated {e.code().name}")

        primaries = [n for n in cluster.nodes if n.role == pb.ROLE_PRIMARY]
        owner = next(n for n in primaries if any(r.start <= 0 <= r.end for r in n.slots))
        target = next(n for n in primaries if n.id != owner.id)
        request = pb.MigrateSlotsRequest(
            request_id="py-1",
            ranges=[pb.SlotRange(start=0, end=99)],
            target_node_id=target.id,
        )
        try:
            op = admin.MigrateSlots(request, metadata=auth, timeout=10)
            last = op
            watch = pb.WatchOperationRequest(id=op.id)
            for last in admin.WatchOperation(watch, metadata=auth, timeout=120):
                pass
            state = pb.OperationState.Name(last.state)
            p = last.progress
            print(f"migrate {state} {p.slots_done}/{p.slots_total} {target.id} {last.error}")
            again = admin.MigrateSlots(request, metadata=auth, timeout=10)
            print(f"again {'same' if again.id == op.id else 'different'}")
        except grpc.RpcError as e:
            print(f"migrate {e.code().name} {e.details()}")

        ops = admin.ListOperations(pb.ListOperationsRequest(), metadata=auth, timeout=10)
        print(f"operations {len(ops.operations)}", flush=True)


if __name__ == "__main__":
    main()
