"""What every image test file starts from: its marks, and the image of ``make image``.

``test_image.py`` runs the image in podman containers; ``test_real_node.py`` and
``test_docs_verbatim.py`` run it as pods of a real kubelet (``conftest.py``). All three need the
image built (or a skip naming why containers cannot run here) and kubectl.
"""

from __future__ import annotations

import pytest

from tests.unit.deploy import rendering
from vkprovider.devcluster import image as image_build
from vkprovider.devcluster.containers import Unavailable
from vkprovider.devcluster.process import StartupError

MARKS = [
    pytest.mark.cluster,
    pytest.mark.image,
    pytest.mark.skipif(rendering.kubectl() is None, reason="no kubectl: run `make cluster-build`"),
]


def built_image() -> str:
    """The image, built by ``make image`` (or here, reusing its layer cache); a skip naming the
    reason where containers cannot be built or run, a failure where the build itself fails."""
    try:
        return image_build.ensure()
    except Unavailable as exc:
        pytest.skip(f"containers cannot run here: {exc}")
    except StartupError as exc:
        pytest.fail(f"the image does not build: {exc}")
