from __future__ import annotations

import pytest

from vkprovider.gpus import GPU_TABLE, gpu_memory_gb, known_gpus, normalize_gpu
from vkprovider.plugins import api


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),
        ("H100 SXM", "H100-SXM-80GB"),
        ("H100_SXM", "H100-SXM-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-SXM-80GB"),
        ("NVIDIA H100 PCIe", "H100-PCIE-80GB"),
        ("H100 NVL", "H100-NVL-94GB"),
        ("RTX 4090", "RTX-4090-24GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090-24GB"),
        ("A100-SXM4-80GB", "A100-SXM-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB"),
        ("A100 PCIE 40GB", "A100-PCIE-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
        ("L40S", "L40S-48GB"),
        ("NVIDIA L4", "L4-24GB"),
        ("A10G", "A10G-24GB"),
        ("NVIDIA A10", "A10-24GB"),
        ("T4", "T4-16GB"),
        ("Tesla-T4", "T4-16GB"),
        ("NVIDIA RTX A6000", "RTX-A6000-48GB"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-ADA-48GB"),
    ],
)
def test_normalize_known_names(name: str, canonical: str) -> None:
    assert normalize_gpu(name) == canonical


def test_every_canonical_id_is_a_fixed_point_with_memory() -> None:
    for shape in GPU_TABLE:
        assert normalize_gpu(shape.canonical) == shape.canonical
        assert gpu_memory_gb(shape.canonical) == shape.memory_gb > 0
    assert len(set(known_gpus())) == len(GPU_TABLE)


def test_unknown_names_are_cleaned_consistently() -> None:
    assert (
        normalize_gpu("Mystery Accelerator 9")
        == normalize_gpu("mystery-accelerator_9")
        == "MYSTERY-ACCELERATOR-9"
    )
    assert gpu_memory_gb("MYSTERY-ACCELERATOR-9") == 0.0
    assert normalize_gpu("") == ""


def test_public_plugin_api_reexports_normalization() -> None:
    assert api.normalize_gpu("H100_SXM") == "H100-SXM-80GB"
    assert "normalize_gpu" in api.__all__
