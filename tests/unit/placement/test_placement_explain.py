from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from placement_support import MemProvider, offer, placer_for, request

from vkprovider.errors import NoCapacity
from vkprovider.placement import PodContext
from vkprovider.placement.explain import (
    ANNOTATION_MAX_BYTES,
    annotation_value,
    decision_dict,
    event_message,
    render_table,
)
from vkprovider.placement.types import Attempt

CTX = PodContext("ns")


async def test_annotation_is_compact_json_with_choice_and_top_five() -> None:
    offers = [offer("a", f"a{i}", 1.0 + i, region=f"r{i}") for i in range(8)] + [
        offer("a", "l4", 0.1, gpu="L4")
    ]
    placer: Any = await placer_for(MemProvider("a", offers))
    decision = placer.rank(request(gpu="H100-SXM-80GB"), CTX)
    doc = json.loads(annotation_value(decision))
    assert doc["chosen"]["offer"] == "a0" and doc["chosen"]["effective"] > doc["chosen"]["price"]
    assert [c["offer"] for c in doc["candidates"]] == ["a0", "a1", "a2", "a3", "a4"]
    assert doc["rejected"] == {"gpu-type": 1} and doc["offers"] == 9


async def test_annotation_stays_bounded_with_huge_names() -> None:
    long = "x" * 300
    offers = [offer("a", f"{long}{i}", 1.0 + i, gpu=f"GPU-{long}", region=f"{long}{i}") for i in range(8)]
    placer: Any = await placer_for(MemProvider("a", offers))
    decision = placer.rank(request(), CTX)
    decision = replace(
        decision, attempts=tuple(Attempt("a", long * 10, "NoCapacity", long) for _ in range(50))
    )
    text = annotation_value(decision)
    assert len(text.encode()) <= ANNOTATION_MAX_BYTES
    assert json.loads(text)["chosen"] is not None


async def test_event_message_after_failover_and_when_nothing_fits() -> None:
    a = MemProvider("a", [offer("a", "a1", 1.0)], failures=[NoCapacity("full")])
    b = MemProvider("b", [offer("b", "b1", 2.0, spot=True)])
    placer: Any = await placer_for(a, b)
    placed = await placer.deploy(request(), CTX)
    message = event_message(placed.decision)
    assert message.startswith("placed on b/b1: H100-SXM-80GBx1 us-east spot at 2/h list")
    assert "after 1 failed attempt(s)" in message
    empty = placer.rank(request(gpu="L4"), CTX)
    assert event_message(empty) == "no provider can take the pod: 2 of 2 offers filtered out"


async def test_table_marks_choice_and_lists_rejections() -> None:
    a = MemProvider(
        "a", [offer("a", "a1", 1.0), offer("a", "a2", 9.0, region="eu"), offer("a", "l4", 0.2, gpu="L4")]
    )
    placer: Any = await placer_for(a)
    decision = placer.rank(
        request(gpu="H100-SXM-80GB"), PodContext("ns", {"vkprovider.io/max-price": "5"}), detail=True
    )
    lines = render_table(decision).splitlines()
    chosen = [line for line in lines if line.startswith("*")]
    assert len(chosen) == 1 and chosen[0].split()[:3] == ["*1", "a", "a1"]
    text = "\n".join(lines)
    assert "price 9/h > max 5/h" in text and "gpu L4 not in [H100-SXM-80GB]" in text
    assert "over max price" in text and "GPU type" in text  # the counts section
    assert decision_dict(decision)["rejected"] == {"gpu-type": 1, "max-price": 1}


async def test_table_with_many_rejections_is_truncated() -> None:
    offers = [offer("a", f"o{i}", 1.0, gpu="L4", region=f"r{i}") for i in range(30)]
    placer: Any = await placer_for(MemProvider("a", offers))
    text = render_table(placer.rank(request(gpu="H100-SXM-80GB"), CTX, detail=True), max_rejections=10)
    assert "(no candidates)" in text and "... and 20 more" in text
