"""The address-reuse kernels of tests/test_address_reuse.py on the GPU: an index read from a
local scalar or from memory is read again after it changes."""
import pytest

from test_address_reuse import local_index_kernel, memory_index_kernel  # noqa: E402

pytestmark = pytest.mark.gpu


def test_moving_indices_read_the_elements_they_name_now():
    torch = pytest.importorskip("torch")
    x = torch.arange(8, dtype=torch.int32, device="cuda") * 10
    o = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    local_index_kernel()(x, o)
    i, o2 = torch.tensor([2], dtype=torch.int32, device="cuda"), o.new_full((2,), -1)
    memory_index_kernel()(x, i, o2)
    assert (o.tolist(), o2.tolist(), i.tolist()) == ([10, 30, 30, 40], [20, 50], [5])
