"""examples/gemm_sm90.py on the CPU: the persistent warp-specialized wgmma GEMM assembles for
sm_90a with no spills and the instruction forms it was designed around, and runs in ptxsim
(TMA ring, mbarrier phases over several tiles per CTA, wgmma, TMA-store epilogue) bit for bit
against numpy on ragged shapes."""
import numpy as np
import pytest

import gemm_sm90 as E
from support import gemm_cases as G
from support.ptxsim import run

_WGMMA = {"bfloat16": "m64n256k16.f32.bf16.bf16", "float16": "m64n256k16.f32.f16.f16",
          "float8_e4m3fn": "m64n256k32.f32.e4m3.e4m3"}


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float8_e4m3fn"])
def test_assembles_without_spills(dt):
    k = E.make_gemm(dt, scaled=dt.startswith("float8"))
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0
    assert r.registers <= 168          # 384 threads x 168 fit the register file
    assert r.resources["smem_bytes"] <= 227 * 1024
    ptx = "\n".join(ln for ln in k.ptx("sm_90a").splitlines()
                    if not ln.lstrip().startswith("//"))                  # instructions only
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{_WGMMA[dt]}") == 4   # BK / instr K
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx"
                     "::bytes") == 3                                       # A halves, B
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == 4   # 64-column boxes
    assert "wgmma.wait_group.sync.aligned 1;" in ptx


@pytest.mark.parametrize("BN,boxes", [(112, (64, 32, 16)), (160, (64, 64, 32)),
                                      (208, (64, 64, 64, 16)), (240, (64, 64, 64, 32, 16))])
def test_tile_widths_past_whole_boxes_store_tail_boxes(BN, boxes):
    """A BN that is a multiple of 16 but not of 64 stores its last columns in 32- and / or
    16-column boxes (64- and 32-byte swizzled tiles): one TMA store per box, per consumer,
    the boxes' widths summing to BN; no spills."""
    import re
    k = E.make_gemm("bfloat16", BN=BN, STAGES=4)
    ptx = "\n".join(ln for ln in k.ptx("sm_90a").splitlines()
                    if not ln.lstrip().startswith("//"))                  # instructions only
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    assert len(stores) == len(boxes)
    assert sum(boxes) == BN
    assert f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16" in ptx
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0 and r.resources["smem_bytes"] <= 227 * 1024


@pytest.mark.parametrize("BN", [100, 48, 272, "128"])
def test_tile_width_refusal_names_the_rule(BN):
    """A BN off the 16-column grid (or not an int) is refused by name before any layout is
    made (it used to surface as the B tile's layout error)."""
    with pytest.raises(ValueError) as e:
        E.make_gemm("bfloat16", BN=BN)
    assert str(e.value) == (f"BN = {BN!r}: a multiple of 16 from 64 to 256 (64-column store "
                            f"boxes, then 32- and 16-column ones)")


def test_promoted_fp8_assembles_without_spills():
    """Two 64 x 128 fp32 tiles (accumulator and partial sum) per consumer thread."""
    k = E.make_gemm("float8_e4m3fn", BN=128, STAGES=5, scaled=True, promote=1)
    r = k.compile("sm_90a")
    assert r.spill_bytes == 0 and r.registers <= 168
    with pytest.raises(ValueError, match="promote=2 keeps two 64 x BN fp32 tiles: BN <= "
                                         "192 fits the consumers' 232 registers, BN = 256"):
        E.make_gemm("float8_e4m3fn", BN=256, scaled=True, promote=2)


def _sim(dt, M, N, K, BN, ctas, promote=0, seed=0, pingpong=False, overlap=False, cluster=1):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, size=(M, K)) / 2
    b = rng.integers(-3, 4, size=(N, K)) / 2
    scaled = dt.startswith("float8")
    k = E.make_gemm(dt, BN=BN, ctas=ctas, scaled=scaled, promote=promote, pingpong=pingpong,
                    overlap=overlap, cluster=cluster)
    ND = -(-N // 8) * 8
    D = np.full((M, ND), 0x7FC1, np.uint16)                       # poisoned (NaN bits)
    sa, sb = np.array([0.5 if scaled else 1], np.float32), np.array([0.25 if scaled else 1],
                                                                       np.float32)
    run(k, [G.encode(a, dt), G.encode(b, dt), D, sa, sb], scalars=[M, K, N, ND])
    ref = (a @ b.T) * (sa[0] * sb[0])
    want = (ref.astype(np.float16).view(np.uint16) if dt == "float16" else E._bf16_bits(ref))
    return D[:, :N], want


@pytest.mark.parametrize("dt,M,N,K,BN,ctas,promote", [
    ("bfloat16", 130, 40, 72, 128, 2, 0),       # one ragged tile per CTA, nk = 2
    ("bfloat16", 260, 130, 72, 128, 2, 0),      # 3 tiles per CTA: the ring wraps across tiles
    ("float16", 70, 300, 40, 256, 1, 0),        # BN 256, N ragged, K inside one stage
    ("float8_e4m3fn", 65, 24, 160, 128, 1, 0),  # fp8, scaled, K = 128 + 32 (zero-filled)
    ("float8_e4m3fn", 40, 20, 500, 128, 2, 1),  # promoted every K-step, 1 tile per CTA
    ("float8_e4m3fn", 70, 200, 300, 192, 1, 1), # BN 192: one 3-box epilogue pass
    ("float8_e4m3fn", 70, 20, 300, 128, 1, 2),  # promoted after K-steps 2 and 3 (the last)
    ("bfloat16", 130, 250, 72, 112, 2, 0),      # BN 112: a 64-column box, 32- and 16-column tails
    ("float16", 70, 230, 72, 208, 1, 0),        # BN 208: three boxes in one pass, a 16 tail
])
def test_sim_matches_numpy(dt, M, N, K, BN, ctas, promote):
    got, want = _sim(dt, M, N, K, BN, ctas, promote)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


@pytest.mark.parametrize("dt,M,N,K,BN,ctas,promote", [
    ("float8_e4m3fn", 40, 20, 500, 128, 2, 1),  # promoted every K-step, 1 tile per CTA
    ("float8_e4m3fn", 260, 130, 128, 128, 1, 1),  # 6 tiles on one CTA: turns across tiles
    ("bfloat16", 260, 130, 72, 128, 2, 0),      # plain accumulation takes turns too
    ("bfloat16", 10, 10, 64, 128, 2, 0),        # CTA 1 has no tile: the turns still balance
])
def test_pingpong_consumers_give_the_same_bits(dt, M, N, K, BN, ctas, promote):
    """The consumers taking turns to issue change when the wgmmas run, not what they sum."""
    got, want = _sim(dt, M, N, K, BN, ctas, promote, pingpong=True)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


@pytest.mark.parametrize("M,N,K,BN,ctas", [
    (40, 20, 100, 128, 1),     # one K-step: no pair, the even tail alone
    (40, 20, 256, 64, 1),      # two: the odd tail
    (130, 64, 300, 64, 1),     # three (a pair, then the even tail), two tiles on one CTA:
])                             # the ring positions carry over
def test_overlapped_partial_tiles_give_the_same_bits(M, N, K, BN, ctas):
    """Two partial tiles, the next K-step's wgmma issued before a tile is added: the same
    sums as promote=1 (integer data: exact, so equal to the reference rounded once)."""
    got, want = _sim("float8_e4m3fn", M, N, K, BN, ctas, 1, overlap=True)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


@pytest.mark.parametrize("dt,M,N,K,BN,ctas,promote,schedule", [
    ("bfloat16", 130, 100, 200, 64, 2, 0, {}),       # one cluster, two 256-row tiles, nk = 4
    ("bfloat16", 300, 64, 72, 64, 4, 0, {}),         # two clusters; the second's rank 1 rows
    #                                                  all past M (zero-filled, not stored)
    ("float8_e4m3fn", 70, 100, 128, 192, 2, 1, {}),  # BN 192: 96-row halves of B
    ("float8_e4m3fn", 130, 64, 300, 64, 2, 1, dict(overlap=True)),    # two partial tiles
    ("float8_e4m3fn", 130, 64, 300, 64, 2, 1, dict(pingpong=True)),   # consumers' turns
])
def test_cluster_pair_shares_b_and_gives_the_same_bits(dt, M, N, K, BN, ctas, promote, schedule):
    """Clusters of two CTAs, each multicasting half of the B tile into both and releasing
    each stage in both: the same sums (integer data: exact)."""
    got, want = _sim(dt, M, N, K, BN, ctas, promote, cluster=2, **schedule)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} of {want.size} differ, first at {bad[0]}"


def test_cluster_pair_forms():
    """Per K-step each CTA issues A's two halves and one multicast half of B (to CTAs 0b11);
    a release arrives on the empty barrier of both CTAs (cluster scope); init and the end
    synchronize the cluster."""
    k = E.make_gemm("float8_e4m3fn", BN=192, STAGES=4, scaled=True, promote=1, cluster=2)
    ptx = k.ptx("sm_90a")
    lines = [ln.strip() for ln in ptx.splitlines() if not ln.lstrip().startswith("//")]
    assert ".reqnctapercluster 2, 1, 1" in ptx or ".reqnctapercluster 2,1,1" in ptx
    mc = [ln for ln in lines if ".multicast::cluster" in ln]
    assert len(mc) == 2 and all(ln.endswith(", 3;") for ln in mc)       # one per rank branch
    remote = [ln for ln in lines
              if ln.startswith("mbarrier.arrive.shared::cluster.b64 _,")]
    assert len(remote) >= 2
    assert lines.count("barrier.cluster.wait;") + lines.count("barrier.cluster.wait.aligned;") >= 2
    assert k.name.endswith("_c2")
    with pytest.raises(ValueError, match=r"cluster=2: 1, or 2 with an even number of CTAs "
                                         r"\(got ctas=131\)"):
        E.make_gemm("bfloat16", ctas=131, cluster=2)


def test_overlap_issues_no_wgmma_under_a_branch():
    """ptxas serializes every wgmma of a kernel (C7514) or injects waits (C7517) when one is
    issued under a branch or a partial tile is read while its group may be in flight; the
    overlapped loop keeps one group in flight and waits for all but it before each add."""
    k = E.make_gemm("float8_e4m3fn", BN=128, STAGES=5, scaled=True, promote=1, overlap=True)
    notes = " ".join(k.compile("sm_90a").notes)
    assert "C7514" not in notes and "C7517" not in notes, notes
    lines = [ln.strip() for ln in k.ptx("sm_90a").splitlines() if not ln.lstrip().startswith("//")]
    assert lines.count("wgmma.wait_group.sync.aligned 1;") == 3
    assert lines.count("wgmma.wait_group.sync.aligned 0;") == 2
    assert k.name.endswith("_p1_ov")
    for kw, why in [(dict(promote=2), "promote=2"), (dict(promote=1, pingpong=True), "pingpong=True"),
                    (dict(promote=1, BN=192), "BN=192")]:
        args = dict(BN=128, scaled=True) | kw
        with pytest.raises(ValueError, match=f"overlap keeps three 64 x BN fp32 tiles of "
                                             f"promote=1 without pingpong: BN <= 128 .*{why}"):
            E.make_gemm("float8_e4m3fn", overlap=True, **args)


def test_pingpong_takes_turns_around_each_wgmma_issue():
    """Per K-step: wait for this warpgroup's turn (bar.sync 10 + c), issue the step's wgmmas,
    hand the turn to the other (bar.arrive 11 - c); warpgroup 1 hands warpgroup 0 the first
    turn, and warpgroup 0 takes the last one back after its tiles."""
    k = E.make_gemm("float8_e4m3fn", BN=192, STAGES=4, scaled=True, promote=1, pingpong=True)
    lines = [ln.strip() for ln in k.ptx("sm_90a").splitlines() if not ln.lstrip().startswith("//")]
    turns = [i for i, ln in enumerate(lines) if ln.startswith("bar") and ln.endswith(", 256;")]
    assert [lines[i].split()[0] for i in turns] == ["bar.arrive", "bar.sync", "bar.arrive",
                                                    "bar.sync"]
    assert lines[turns[0]] == "bar.arrive 10, 256;" and lines[turns[3]] == "bar.sync 10, 256;"
    step = lines[turns[1]:turns[2]]
    assert sum(ln.startswith("wgmma.mma_async") for ln in step) == 4     # BK 128 / K 32
    assert sum(ln.startswith("wgmma.mma_async") for ln in lines) == 4    # none outside a turn
    assert k.name.endswith("_pp")
