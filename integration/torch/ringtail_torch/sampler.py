"""Per-rank batch assignments as torch.utils.data samplers.

A rank that is k times slower gets 1/k of a fast rank's share, so every
rank finishes its part of a step at about the same time; with the Eq. 7
weighting of gradients (set_local_batch) the update equals the one from
the same global batch split evenly.
"""

import math

import torch
from torch.utils.data import Sampler


def split_counts(total, weights, min_one=False):
    """Splits total items into len(weights) integer shares proportional to
    weights (largest remainder, ties to the lower rank). With min_one every
    share gets at least one item (needs total >= len(weights))."""
    w = [float(x) for x in weights]
    if not w or any(not (x >= 0) or math.isinf(x) for x in w) or sum(w) <= 0:
        raise ValueError("weights %r must be finite, non-negative, not all zero" % (weights,))
    if total < 0:
        raise ValueError("total %d is negative" % total)
    n = len(w)
    if min_one:
        if total < n:
            raise ValueError("cannot give %d ranks at least one of %d items" % (n, total))
        base, total = [1] * n, total - n
    else:
        base = [0] * n
    s = sum(w)
    exact = [total * x / s for x in w]
    counts = [int(math.floor(e)) for e in exact]
    left = total - sum(counts)
    order = sorted(range(n), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:left]:
        counts[i] += 1
    return [b + c for b, c in zip(base, counts)]


def throughput_weights(samples_per_second):
    """Weights proportional to each rank's measured throughput, scaled so
    the fastest rank has weight 1."""
    top = max(samples_per_second)
    if not top > 0:
        raise ValueError("throughputs %r: none is positive" % (samples_per_second,))
    return [max(0.0, float(x)) / top for x in samples_per_second]


def measure_weights(samples, seconds, group=None):
    """Collective: every rank reports how many samples it computed in how
    many seconds; returns throughput_weights of all ranks (the same list on
    every rank). Works over any backend."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    mine = torch.tensor([float(samples) / max(float(seconds), 1e-9)], dtype=torch.float64)
    out = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(out, mine, group=group)
    return throughput_weights([float(t.item()) for t in out])


def _check(rank, world, weights):
    if world < 1 or not 0 <= rank < world:
        raise ValueError("rank %d outside 0..%d" % (rank, world - 1))
    if weights is None:
        return [1.0] * world
    if len(weights) != world:
        raise ValueError("%d weights for %d ranks" % (len(weights), world))
    return list(weights)


def _permutation(n, seed, epoch, shuffle):
    if not shuffle:
        return list(range(n))
    g = torch.Generator()
    g.manual_seed(int(seed) + int(epoch))
    return torch.randperm(n, generator=g).tolist()


class HeteroSampler(Sampler):
    """Each epoch, a seeded permutation of the dataset is cut into disjoint
    slices, one per rank, of sizes proportional to weights; this rank
    iterates its slice. Deterministic given (seed, epoch); the slices of
    all ranks cover the dataset exactly (drop_last trims it to a multiple
    of the world size first). Call set_epoch(e) before each epoch, like
    DistributedSampler; set_weights changes the split of later epochs and
    must be called with the same weights on every rank."""

    def __init__(self, dataset, rank, world, weights=None, seed=0, shuffle=True, drop_last=False):
        self.n = len(dataset)
        self.rank, self.world = rank, world
        self.weights = _check(rank, world, weights)
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def set_weights(self, weights):
        self.weights = _check(self.rank, self.world, weights)

    def _counts(self):
        total = self.n - (self.n % self.world if self.drop_last else 0)
        return split_counts(total, self.weights)

    def __iter__(self):
        perm = _permutation(self.n, self.seed, self.epoch, self.shuffle)
        counts = self._counts()
        start = sum(counts[: self.rank])
        return iter(perm[start : start + counts[self.rank]])

    def __len__(self):
        return self._counts()[self.rank]


class HeteroBatchSampler(Sampler):
    """Yields this rank's batches: each epoch's seeded permutation is cut
    into global batches of global_batch indices, and each global batch is
    split across ranks in proportion to weights, at least one index per
    rank. Every rank yields the same number of batches (so the same number
    of collectives), and the global batches are those of an even split with
    the same seed. A last global batch with fewer indices than ranks is
    dropped (as is any short last batch with drop_last). Use it as
    DataLoader(dataset, batch_sampler=...), and call
    set_local_batch(len(batch)) each step."""

    def __init__(self, dataset, rank, world, weights=None, global_batch=64, seed=0, shuffle=True, drop_last=False):
        if global_batch < world:
            raise ValueError("global batch %d is smaller than the world %d" % (global_batch, world))
        self.n = len(dataset)
        self.rank, self.world = rank, world
        self.weights = _check(rank, world, weights)
        self.global_batch = global_batch
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def set_weights(self, weights):
        self.weights = _check(self.rank, self.world, weights)

    def _chunks(self):
        full, rest = divmod(self.n, self.global_batch)
        sizes = [self.global_batch] * full
        if rest and not self.drop_last and rest >= self.world:
            sizes.append(rest)
        return sizes

    def local_sizes(self):
        """This rank's batch size at each step of an epoch."""
        return [split_counts(s, self.weights, min_one=True)[self.rank] for s in self._chunks()]

    def __iter__(self):
        perm = _permutation(self.n, self.seed, self.epoch, self.shuffle)
        off = 0
        for size in self._chunks():
            counts = split_counts(size, self.weights, min_one=True)
            start = off + sum(counts[: self.rank])
            yield perm[start : start + counts[self.rank]]
            off += size

    def __len__(self):
        return len(self._chunks())
