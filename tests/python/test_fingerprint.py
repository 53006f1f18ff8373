"""The data fingerprint (DataIdentity) and what feeds it: the sampler's
indices (watch_indices / indices_of) and the seeding (seed_all). What
tuneloop compares between a baseline and a turn to tell that a setting did
not change the data: its parts must move when the data moves, and stay put
when only a loader setting does."""

import random

import pytest


def fingerprint(H, torch, batches, indices=None):
    ident = H.DataIdentity()
    for k, b in enumerate(batches):
        ident.add(b, None if indices is None else indices[k], torch)
    return ident.result()


def tensors(torch, scale=1.0, n=3):
    return [(torch.arange(4.0) * scale + k, torch.tensor([k, k + 1])) for k in range(n)]


def test_same_batches_same_fingerprint(H, torch):
    a = fingerprint(H, torch, tensors(torch), [[0, 1], [2, 3], [4, 5]])
    b = fingerprint(H, torch, tensors(torch), [[0, 1], [2, 3], [4, 5]])
    assert a == b
    ident, whole = a
    assert ident["batches"] == 3
    assert all(ident[k] for k in ("items", "order", "structure", "bytes"))
    assert len(whole) == 64


def test_changed_values_change_bytes_not_structure(H, torch):
    (a, wa), (b, wb) = (fingerprint(H, torch, tensors(torch, s)) for s in (1.0, 2.0))
    assert a["bytes"] != b["bytes"]
    assert a["structure"] == b["structure"]
    assert wa != wb


def test_changed_shape_or_dtype_changes_structure(H, torch):
    base, _ = fingerprint(H, torch, [torch.zeros(2, 3)])
    shape, _ = fingerprint(H, torch, [torch.zeros(3, 2)])
    dtype, _ = fingerprint(H, torch, [torch.zeros(2, 3, dtype=torch.float64)])
    assert base["structure"] != shape["structure"]
    assert base["structure"] != dtype["structure"]


def test_order_is_sensitive_items_are_not(H, torch):
    batches = tensors(torch)
    a, _ = fingerprint(H, torch, batches, [[0, 1], [2, 3], [4, 5]])
    within, _ = fingerprint(H, torch, batches, [[1, 0], [2, 3], [5, 4]])
    across, _ = fingerprint(H, torch, batches, [[2, 3], [0, 1], [4, 5]])
    assert a["items"] == within["items"] == across["items"]
    assert a["order"] != within["order"]
    assert a["order"] != across["order"]


def test_other_items_change_items(H, torch):
    batches = tensors(torch)
    a, _ = fingerprint(H, torch, batches, [[0, 1], [2, 3], [4, 5]])
    b, _ = fingerprint(H, torch, batches, [[0, 1], [2, 3], [4, 6]])
    assert a["items"] != b["items"]


def test_unknown_indices_leave_items_and_order_out(H, torch):
    ident, _ = fingerprint(H, torch, tensors(torch))
    assert ident["items"] is None and ident["order"] is None
    # An iterable dataset's placeholder index (None) is not an index either.
    ident, _ = fingerprint(H, torch, tensors(torch), [None, None, None])
    assert ident["items"] is None


def test_only_the_first_batches_count(H, torch):
    n = H.FINGERPRINT_BATCHES
    first = tensors(torch, n=n)
    a = fingerprint(H, torch, first + [torch.zeros(1)])
    b = fingerprint(H, torch, first + [torch.ones(7)])
    assert a == b
    assert a[0]["batches"] == n


def test_dict_batches_ignore_key_order_but_not_keys(H, torch):
    x, y = torch.arange(3), torch.arange(3) * 2
    a, _ = fingerprint(H, torch, [{"x": x, "y": y}])
    b, _ = fingerprint(H, torch, [{"y": y, "x": x}])
    c, _ = fingerprint(H, torch, [{"x": x, "z": y}])
    assert a == b
    assert a["structure"] != c["structure"]


def test_non_tensor_leaves_count_by_value(H, torch):
    a, _ = fingerprint(H, torch, [(torch.zeros(2), ["cat.jpg", "dog.jpg"])])
    b, _ = fingerprint(H, torch, [(torch.zeros(2), ["cat.jpg", "cow.jpg"])])
    assert a["structure"] == b["structure"]
    assert a["bytes"] != b["bytes"]


def test_unreadable_batch_does_not_raise(H, torch):
    class Odd:
        def keys(self):
            raise RuntimeError("no keys")

        def __getitem__(self, k):
            raise KeyError(k)

    ident, _ = fingerprint(H, torch, [Odd()])
    assert ident["batches"] == 1


def test_seed_all_resets_python_numpy_and_torch(H, torch):
    import numpy as np

    H.seed_all(torch)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    random.random(), np.random.rand(), torch.rand(5)
    H.seed_all(torch)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
    random.seed(H.SEED)
    torch.manual_seed(H.SEED)
    assert first[0] == random.random() and first[2] == torch.rand(1).item()


# -- indices from a real DataLoader ---------------------------------------

class Items:
    def __init__(self, n=24, scale=1.0):
        self.n, self.scale = n, scale

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        return torch.full((2,), float(i) * self.scale), i


@pytest.fixture
def watched(H, monkeypatch):
    """torch's dataloader module with _next_index watched, put back after."""
    import torch.utils.data.dataloader as dl

    monkeypatch.setattr(dl._BaseDataLoaderIter, "_next_index", dl._BaseDataLoaderIter._next_index)
    monkeypatch.setattr(dl._BaseDataLoaderIter, "_tl_indices", False, raising=False)
    H.watch_indices(dl)
    H.watch_indices(dl)  # idempotent: wrapped once
    return dl


def loader_identity(H, torch, dl, scale=1.0, **settings):
    """The identity of a loader's first batches after the seeding a
    measured run does, and the indices seen."""
    H.seed_all(torch)
    loader = dl.DataLoader(Items(scale=scale), batch_size=4, shuffle=True, **settings)
    it = iter(loader)
    ident, seen = H.DataIdentity(), []
    for _ in range(H.FINGERPRINT_BATCHES + 1):
        batch = next(it)
        idx = H.indices_of(it)
        seen.append(idx)
        ident.add(batch, idx, torch)
    del it
    return ident.result()[0], seen


def test_indices_of_gives_the_batch_items(H, torch, watched):
    H.seed_all(torch)
    loader = watched.DataLoader(Items(), batch_size=4, shuffle=True)
    it = iter(loader)
    for _ in range(H.FINGERPRINT_BATCHES):
        x, labels = next(it)
        assert H.indices_of(it) == labels.tolist()
    next(it)
    assert H.indices_of(it) is None  # past the first batches


def test_indices_restart_each_epoch(H, torch, watched):
    loader = watched.DataLoader(Items(n=8), batch_size=4, shuffle=True)
    for _ in range(2):
        it = iter(loader)
        _, labels = next(it)
        assert H.indices_of(it) == labels.tolist()


def test_worker_count_does_not_change_the_identity(H, torch, watched):
    none, seen0 = loader_identity(H, torch, watched, num_workers=0)
    two, seen2 = loader_identity(H, torch, watched, num_workers=2)
    assert none == two
    assert seen0[:H.FINGERPRINT_BATCHES] == seen2[:H.FINGERPRINT_BATCHES]
    assert none["items"] is not None


def test_changed_data_changes_bytes_not_items_or_order(H, torch, watched):
    a, _ = loader_identity(H, torch, watched)
    b, _ = loader_identity(H, torch, watched, scale=3.0)
    assert a["bytes"] != b["bytes"]
    assert (a["items"], a["order"], a["structure"]) == (b["items"], b["order"], b["structure"])


def test_unseeded_shuffle_draws_another_order(H, torch, watched):
    # Without seed_all between them two loaders draw two orders: what
    # seed_all is there to prevent (the previous test's equal orders).
    loader = watched.DataLoader(Items(), batch_size=4, shuffle=True)
    H.seed_all(torch)
    a = [next(iter(loader))[1].tolist() for _ in range(3)]
    assert len({tuple(x) for x in a}) > 1


def test_persistent_workers_restart_the_indices_each_epoch(H, torch, watched):
    # The iterator object is reused across epochs; its sampler iterator is not.
    loader = watched.DataLoader(Items(n=8), batch_size=4, shuffle=True, num_workers=1,
                                persistent_workers=True)
    first = iter(loader)
    for epoch in range(2):
        it = iter(loader)
        assert it is first
        _, labels = next(it)
        assert H.indices_of(it) == labels.tolist(), epoch
        for _ in it:
            pass
    del first, it
