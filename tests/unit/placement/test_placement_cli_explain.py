"""``vkprovider explain`` run in-process: its chosen row must be what ``Placer.rank`` picks."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from placement_support import MemProvider

from vkprovider.cli import main
from vkprovider.http.explain import pod_request_context
from vkprovider.models import Offer
from vkprovider.placement import PlacementConfig, Placer

OFFERS = {
    "cheap": [
        {
            "offer_id": "c-h100",
            "gpu_type": "H100-SXM-80GB",
            "gpu_count": 1,
            "region": "eu-west",
            "price_per_hour": 2.0,
            "capacity": 2,
        },
        {
            "offer_id": "c-l4",
            "gpu_type": "L4-24GB",
            "gpu_count": 1,
            "region": "eu-west",
            "price_per_hour": 0.4,
            "capacity": 9,
        },
    ],
    "premium": [
        {
            "offer_id": "p-h100",
            "gpu_type": "H100-SXM-80GB",
            "gpu_count": 1,
            "region": "us-east",
            "price_per_hour": 2.2,
            "capacity": 20,
        },
        {
            "offer_id": "p-h100x8",
            "gpu_type": "H100-SXM-80GB",
            "gpu_count": 8,
            "region": "us-east",
            "price_per_hour": 17.0,
            "capacity": 2,
        },
    ],
}
PLACEMENT = {"providers": {"premium": {"discount": 0.2}}}

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "llm-0",
        "namespace": "serving",
        "annotations": {"vkprovider.io/regions-deny": "ap-south"},
    },
    "spec": {
        "containers": [
            {
                "name": "server",
                "image": "vllm/vllm-openai:latest",
                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "t"}}}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        ],
        "nodeSelector": {"nvidia.com/gpu.product": "H100-SXM-80GB"},
        "volumes": [{"name": "cfg", "configMap": {"name": "missing-too"}}],
    },
}


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def config_file(tmp_path: Path) -> str:
    providers = [
        {"name": n, "adapter": "placement_support:StaticAdapter", "settings": {"offers": o}}
        for n, o in OFFERS.items()
    ]
    return write(tmp_path, "config.yaml", {"providers": providers, "placement": PLACEMENT})


def chosen_row(out: str) -> list[str]:
    rows = [line.split() for line in out.splitlines() if re.match(r"^\*\d+\s", line)]
    assert len(rows) == 1, out
    return rows[0]


def expected_choice(pod: dict[str, Any]) -> tuple[str, str]:
    async def run() -> tuple[str, str]:
        providers = {
            n: MemProvider(n, [Offer.model_validate({"provider": n, **o}) for o in rows])
            for n, rows in OFFERS.items()
        }
        placer = Placer(providers, PlacementConfig.model_validate(PLACEMENT))
        await placer.refresh()
        request, ctx = await pod_request_context(pod, "vk-external")
        best = placer.rank(request, ctx).candidates[0]
        return best.provider, best.offer.offer_id

    return asyncio.run(run())


def test_explain_table_matches_placer_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "-f", write(tmp_path, "pod.yaml", POD), "--config", config_file(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    row = chosen_row(out)
    # premium's 20 % discount beats cheap's lower list price: 2.2 x 0.8 < 2.0
    assert (row[1], row[2]) == expected_choice(POD) == ("premium", "p-h100")
    assert "gpu L4-24GB not in [H100-SXM-80GB]" in out  # filtered-out offers and why


def test_explain_follows_annotations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = json.loads(json.dumps(POD))
    pod["metadata"]["annotations"]["vkprovider.io/providers-deny"] = "premium"
    code = main(["explain", "-f", write(tmp_path, "pod.yaml", pod), "--config", config_file(tmp_path)])
    out = capsys.readouterr().out
    row = chosen_row(out)
    assert code == 0 and (row[1], row[2]) == expected_choice(pod) == ("cheap", "c-h100")


def test_explain_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["explain", "-f", write(tmp_path, "pod.yaml", POD), "--config", config_file(tmp_path), "--json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["chosen"]["provider"] == "premium" and doc["refresh_errors"] == {}


def test_no_candidate_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = json.loads(json.dumps(POD))
    pod["metadata"]["annotations"]["vkprovider.io/max-price"] = "0.5"
    code = main(["explain", "-f", write(tmp_path, "pod.yaml", pod), "--config", config_file(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "(no candidates)" in out and "over max price" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read pod file"),
        ("a: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "expected a Pod object"),
        ("kind: Deployment\nspec: {}\n", "kind: expected Pod, got 'Deployment'"),
        ("kind: Pod\nmetadata: {name: x}\nspec: {}\n", "spec.containers"),
        (
            yaml.safe_dump(
                {**POD, "metadata": {"name": "x", "annotations": {"vkprovider.io/spot": "sometimes"}}}
            ),
            "annotation vkprovider.io/spot='sometimes'",
        ),
    ],
)
def test_bad_input_is_one_error_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    pod = tmp_path / "pod.yaml"
    if content is not None:
        pod.write_text(content)
    code = main(["explain", "-f", str(pod), "--config", config_file(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], captured.err
    assert "Traceback" not in captured.err


def test_missing_config_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "-f", write(tmp_path, "pod.yaml", POD), "--config", str(tmp_path / "nope.yaml")])
    assert code == 2 and "config file not found" in capsys.readouterr().err
