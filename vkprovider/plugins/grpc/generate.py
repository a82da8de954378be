"""Regenerate the protobuf/gRPC Python code from ``proto/`` (``make proto``).

The generated files are committed under ``vkprovider/plugins/_generated/`` so that installing
vkprovider never needs grpcio-tools or protoc, and so a reviewer sees contract changes as diffs.
A unit test regenerates into a temporary directory and fails on any difference, so the committed
files cannot drift from the proto.

Only messages are generated (``provider_pb2``): the host and ``serve_adapter`` bind the service
methods themselves (``vkprovider.plugins.grpc.methods``), which keeps every call typed and avoids
the version pin that ``*_pb2_grpc.py`` files carry. protoc derives Python paths from the proto
package (``vkprovider.v1``), which would clash with the ``vkprovider`` package, so the output is
flattened into ``_generated``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PROTO_ROOT = REPO_ROOT / "proto"
OUT_DIR = REPO_ROOT / "vkprovider" / "plugins" / "_generated"
PROTO_FILES = ("vkprovider/v1/provider.proto",)

_INIT = '"""Generated from proto/ by ``make proto``; do not edit."""\n'


def _protoc(args: list[str]) -> int:
    from grpc_tools import protoc  # type: ignore[import-untyped]  # dev-only, imported lazily

    return int(protoc.main(args))


def generate(out_dir: Path = OUT_DIR, proto_root: Path = PROTO_ROOT) -> list[Path]:
    """Write the generated modules into ``out_dir`` and return their paths."""
    well_known = str(resources.files("grpc_tools") / "_proto")
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            *PROTO_FILES,
        ]
        if _protoc(args) != 0:
            raise RuntimeError(f"protoc failed for {PROTO_FILES}")
        out_dir.mkdir(parents=True, exist_ok=True)
        for proto in PROTO_FILES:
            for src in sorted((Path(tmp) / Path(proto).parent).iterdir()):
                dest = out_dir / src.name
                dest.write_text(src.read_text())
                written.append(dest)
    init = out_dir / "__init__.py"
    init.write_text(_INIT)
    written.append(init)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    args = parser.parse_args(argv)
    if args.out == OUT_DIR and OUT_DIR.exists():
        shutil.rmtree(OUT_DIR)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
