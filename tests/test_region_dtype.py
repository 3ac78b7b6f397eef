"""An autocast region has a dtype (issue 36): a file whose regions are all written to lower
to bfloat16 brings no float16, so a model every cast of which writes bfloat16 keeps
bfloat16's range under them (:meth:`~mpcheck.project.models.ModelUses.bfloat16_only`).

torch.autocast lowers to its ``dtype=``, else to its device's default: float16 on CUDA,
bfloat16 on the CPU. The xfile pair ``good_bfloat16_autocast_region`` /
``bad_float16_autocast_region`` proves both sides under torch (tests/test_xfile.py).
"""

from __future__ import annotations

import pytest

from mpcheck.project.records import record_of


@pytest.mark.parametrize(
    ("code", "float16"),
    [
        ("with torch.autocast('cuda', dtype=torch.bfloat16):\n    pass\n", False),
        ("with torch.autocast(device_type='cuda', dtype=torch.bfloat16):\n    pass\n", False),
        ("with torch.amp.autocast('cuda', torch.bfloat16):\n    pass\n", False),
        ("with torch.autocast('cpu'):\n    pass\n", False),
        ("with torch.autocast(device_type='cpu'):\n    pass\n", False),
        ("with torch.cpu.amp.autocast():\n    pass\n", False),
        ("DT = torch.bfloat16\nwith torch.autocast('cuda', dtype=DT):\n    pass\n", False),
        ("with torch.autocast('cuda', enabled=False):\n    pass\n", False),
        ("import torch\n", False),
        ("amp = functools.partial(torch.autocast, 'cpu', dtype=torch.bfloat16)\n", False),
        ("amp = partial(torch.autocast, 'cuda', enabled=False)\n", False),
        ("with torch.autocast('cuda'):\n    pass\n", True),
        ("with torch.autocast(device_type=x.device.type):\n    pass\n", True),
        ("with torch.autocast('cpu', dtype=torch.float16):\n    pass\n", True),
        ("with torch.autocast('cuda', dtype=torch.bfloat16 if bf16 else torch.half):\n", True),
        ("with torch.autocast('cuda', dtype=amp_dtype):\n    pass\n", True),
        ("def f(amp_dtype):\n    with torch.autocast('cuda', dtype=amp_dtype):\n", True),
        ("DT = torch.bfloat16\nDT = torch.float16\nwith torch.autocast('cuda', dtype=DT):\n", True),
        ("with accelerator.autocast():\n    pass\n", True),
        ("make = torch.autocast\n", True),
        ("amp = partial(torch.autocast, 'cuda')\n", True),
        ("torch.set_autocast_enabled(True)\n", True),
        ("from lightning import Trainer\n", True),
    ],
)
def test_a_file_may_autocast_to_float16(code: str, float16: bool) -> None:
    assert record_of(code.encode(), "pkg/train.py").autocast_float16 is float16
