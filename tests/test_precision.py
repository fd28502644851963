"""round_to_tf32 against exact bit patterns; fp32_precision sets and restores every flag."""

import pytest
import torch

from course_utils.precision import (
    chained_matmul,
    cpu_bf16_support,
    fp32_precision,
    matmul_error,
    power_law_fit,
    precision_state,
    relative_error,
    round_to_tf32,
    tf32_defaults,
)


def _f32(*patterns: int) -> torch.Tensor:
    ints = [p - 2**32 if p >= 2**31 else p for p in patterns]
    return torch.tensor(ints, dtype=torch.int32).view(torch.float32)


def _bits(x: torch.Tensor) -> list[int]:
    return [v & 0xFFFFFFFF for v in x.view(torch.int32).tolist()]


@pytest.mark.parametrize(
    ("given", "want"),
    [
        (0x3F800000, 0x3F800000),  # 1.0 is exact
        (0x3F800FFF, 0x3F800000),  # just below half an ulp: down
        (0x3F801000, 0x3F800000),  # tie, kept bit even (0): down
        (0x3F801001, 0x3F802000),  # just above half: up
        (0x3F803000, 0x3F804000),  # tie, kept bit odd (1): up to even
        (0xBF803000, 0xBF804000),  # negative tie rounds the magnitude the same way
        (0xBF801000, 0xBF800000),
        (0x3FFFF000, 0x40000000),  # carry into the exponent: 1.99987... -> 2.0
        (0x00001000, 0x00000000),  # subnormal tie to even (zero)
        (0x00003000, 0x00004000),  # subnormal tie up to even
        (0x007FFFFF, 0x00800000),  # largest subnormal rounds up to the smallest normal
        (0x80000FFF, 0x80000000),  # tiny negative subnormal to -0
        (0x7F7FEFFF, 0x7F7FE000),  # below the tie: TF32's largest finite number
        (0x7F7FF000, 0x7F800000),  # tie at the top, odd kept bit: overflow to inf
        (0x7F7FFFFF, 0x7F800000),  # float32 max rounds to inf
        (0xFF7FFFFF, 0xFF800000),
        (0x7F800000, 0x7F800000),  # inf
        (0xFF800000, 0xFF800000),  # -inf
        (0x00000000, 0x00000000),
        (0x80000000, 0x80000000),  # -0 keeps its sign
    ],
)
def test_round_to_tf32_bit_patterns(given, want):
    assert _bits(round_to_tf32(_f32(given))) == [want]


@pytest.mark.parametrize("nan", [0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFC00000])
def test_round_to_tf32_keeps_nan(nan):
    out = round_to_tf32(_f32(nan))
    assert torch.isnan(out).all()


def test_round_to_tf32_matches_nearest_tf32_value_on_random_inputs():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0))
    out = round_to_tf32(x)
    assert (torch.tensor(_bits(out)) & 0x1FFF == 0).all()  # 10 mantissa bits left
    ulp = torch.tensor(2.0).pow(torch.floor(torch.log2(x.abs())) - 10)
    assert ((out - x).abs() <= ulp / 2).all()  # nearest: within half a TF32 ulp
    assert out.shape == x.shape


def test_round_to_tf32_keeps_shape_of_non_contiguous_input():
    x = torch.randn(4, 6).t()
    assert torch.equal(round_to_tf32(x), round_to_tf32(x.contiguous()))


def test_round_to_tf32_rejects_other_dtypes():
    with pytest.raises(ValueError, match=r"float32 tensor .* got torch.float64; convert"):
        round_to_tf32(torch.ones(2, dtype=torch.float64))


def test_relative_error_is_max_over_mean():
    exact = torch.tensor([1.0, -3.0])
    assert relative_error(torch.tensor([1.5, -3.0]), exact) == pytest.approx(0.5 / 2.0)


def test_matmul_error_figures_match_the_notes_order_of_magnitude():
    tf32, ieee = matmul_error(512, "tf32"), matmul_error(512, "ieee")
    assert 1e-3 < tf32 < 3e-3  # the CUDA notes: 0.0022 at n = 10240
    assert ieee < 1e-5
    with pytest.raises(ValueError, match="mode='fp8' is not one of"):
        matmul_error(8, "fp8")


def _routes():
    routes = ["legacy"]
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        routes.append("new")
    return routes


@pytest.mark.parametrize("api", _routes())
@pytest.mark.parametrize("mode", ["tf32", "ieee"])
def test_fp32_precision_sets_mode_and_restores_after_exception(api, mode):
    before = precision_state()
    with pytest.raises(KeyError, match="boom"):
        with fp32_precision(mode, api=api) as route:
            assert route == api
            if api == "legacy":
                want = "high" if mode == "tf32" else "highest"
                assert torch.get_float32_matmul_precision() == want
                assert torch.backends.cudnn.allow_tf32 is (mode == "tf32")
            else:
                assert torch.backends.cuda.matmul.fp32_precision == mode
                assert torch.backends.cudnn.conv.fp32_precision == mode
                assert torch.backends.cudnn.rnn.fp32_precision == mode
            raise KeyError("boom")
    assert precision_state() == before


@pytest.mark.parametrize("api", _routes())
def test_fp32_precision_restores_a_non_default_start(api):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.allow_tf32 = False
    try:
        before = precision_state()
        with fp32_precision("tf32", api=api):
            pass
        assert precision_state() == before
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(previous)
        torch.backends.cudnn.allow_tf32 = True


@pytest.mark.skipif(
    not hasattr(torch.backends.cuda.matmul, "fp32_precision"),
    reason="needs the fp32_precision API (PyTorch >= 2.9)",
)
def test_new_api_makes_legacy_getters_raise_and_state_reports_it():
    before = precision_state()
    with fp32_precision("tf32", api="new"):
        state = precision_state()
        assert state["torch.get_float32_matmul_precision()"] == "error: mixed legacy and new API"
        with pytest.raises(ValueError, match="mix the legacy and the new API"):
            with fp32_precision("ieee", api="legacy"):
                pass
    assert precision_state() == before


def test_fp32_precision_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode='fp16' is not one of"):
        with fp32_precision("fp16"):
            pass
    with pytest.raises(ValueError, match="api='old' is not one of"):
        with fp32_precision("tf32", api="old"):
            pass


def test_state_reports_environment_overrides(monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", raising=False)
    state = precision_state()
    assert state["env NVIDIA_TF32_OVERRIDE"] == "0"
    assert state["env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] == "unset"


@pytest.mark.gpu
def test_tf32_on_gpu_matches_emulation_order_of_magnitude():
    a = torch.randn(1024, 1024, dtype=torch.float64, device="cuda")
    exact = a @ a
    with fp32_precision("tf32"):
        tf32 = relative_error(a.float() @ a.float(), exact)
    with fp32_precision("ieee"):
        ieee = relative_error(a.float() @ a.float(), exact)
    major, _ = torch.cuda.get_device_capability()
    if major >= 8:  # TF32 tensor cores exist from Ampere on
        assert 5e-4 < tf32 < 5e-3
    assert ieee < 1e-4


def test_chained_matmul_matches_the_product_and_restores_the_thread_count():
    threads = torch.get_num_threads()
    a, b = torch.randn(5, 7, dtype=torch.float64), torch.randn(7, 3, dtype=torch.float64)
    assert torch.allclose(chained_matmul(a, b), a @ b)
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError, match=r"shapes \(5, 7\) and \(5, 7\)"):
        chained_matmul(a, a)


def test_chained_summation_error_grows_about_as_sqrt_n_where_the_library_stays_flat():
    ns = (256, 512, 1024)  # past the CPU library's block length along k
    chained = [matmul_error(n, "ieee", summation="chain") for n in ns]
    library = [matmul_error(n, "ieee") for n in ns]
    assert 0.35 < power_law_fit(ns, chained).exponent < 0.75
    assert max(library) < 2 * min(library) and library[-1] < chained[-1]
    with pytest.raises(ValueError, match="summation='pairwise' is not one of"):
        matmul_error(8, summation="pairwise")


def test_power_law_fit_recovers_scale_and_exponent():
    fit = power_law_fit([1, 4, 16], [3.0, 6.0, 12.0])  # 3 * x ** 0.5
    assert fit.exponent == pytest.approx(0.5) and fit.scale == pytest.approx(3.0)
    assert fit(64) == pytest.approx(24.0)
    with pytest.raises(ValueError, match="two or more positive"):
        power_law_fit([1], [2.0])


@pytest.mark.parametrize(
    ("version", "want"),
    [
        ("1.6.0", None),
        ("1.7.1", {"matmul": True, "cudnn": True}),
        ("1.11.0+cu113", {"matmul": True, "cudnn": True}),
        ("1.12.0", {"matmul": False, "cudnn": True}),
        ("2.14.1+cu130", {"matmul": False, "cudnn": True}),
    ],
)
def test_tf32_defaults_follow_the_pytorch_version(version, want):
    assert tf32_defaults(version) == want


def test_tf32_defaults_match_this_pytorch_at_start():
    state = precision_state()
    want = tf32_defaults(torch.__version__)
    assert state["torch.backends.cuda.matmul.allow_tf32"] is want["matmul"]
    assert state["torch.backends.cudnn.allow_tf32"] is want["cudnn"]
    with pytest.raises(ValueError, match="not a PyTorch version"):
        tf32_defaults("latest")


def test_cpu_bf16_support_names_hardware_or_says_none(monkeypatch):
    assert isinstance(cpu_bf16_support(), str)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert cpu_bf16_support() == "AMX and AVX-512 BF16"
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert cpu_bf16_support().startswith("none detected")


def test_saved_for_backward_bytes_shrink_under_bfloat16_autocast():
    """Lesson 04's memory line: autocast saves bfloat16 activations (half of float32's bytes),
    but not everything it saves shrinks (max-pooling's int64 indices), so less than float32
    and more than half of it."""
    from course_utils.models import Net
    from course_utils.precision import saved_for_backward_bytes

    torch.manual_seed(0)
    net, x, y = Net(), torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    full = saved_for_backward_bytes(net, x, y)
    low = saved_for_backward_bytes(net, x, y, autocast_dtype=torch.bfloat16)
    assert full > x.nbytes  # the input of the first convolution, and more
    assert 0.5 * full < low < 0.75 * full, (low, full)
