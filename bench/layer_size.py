"""P6: SharedLayer's size as `sam build` leaves it, unzipped and zipped (what Lambda stores)."""

import io
import zipfile

from bench.common import BUILD, Figure

# Lambda's quotas: 250 MB unzipped for a function with all its layers, 50 MB zipped per upload.
UNZIPPED_LIMIT_MB = 250
ZIPPED_LIMIT_MB = 50


def run() -> list[Figure]:
    layer = BUILD / "SharedLayer"
    if not layer.is_dir():  # no `sam build`: nothing to measure (an empty layer would "hold")
        return [
            Figure(
                "P6",
                "layer size",
                0,
                "MB",
                f"<= {UNZIPPED_LIMIT_MB} / {ZIPPED_LIMIT_MB}",
                None,
                f"NOT MEASURED: {layer} missing; run `sam build` (make bench does)",
            )
        ]
    files = [path for path in layer.rglob("*") if path.is_file()]
    unzipped = sum(path.stat().st_size for path in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(layer))
    zipped = buffer.tell()
    unzipped_mb, zipped_mb = unzipped / 1e6, zipped / 1e6
    return [
        Figure(
            "P6",
            "layer size unzipped",
            round(unzipped_mb, 1),
            "MB",
            f"<= {UNZIPPED_LIMIT_MB} (Lambda limit)",
            unzipped_mb <= UNZIPPED_LIMIT_MB,
            f"{len(files)} files in {layer.relative_to(BUILD.parent.parent)}",
        ),
        Figure(
            "P6",
            "layer size zipped",
            round(zipped_mb, 1),
            "MB",
            f"<= {ZIPPED_LIMIT_MB} (Lambda limit)",
            zipped_mb <= ZIPPED_LIMIT_MB,
            "deflate, as sam deploy uploads it",
        ),
    ]
