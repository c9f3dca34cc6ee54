"""The batch-1 timeline suite's reading side (fit, summary, figure) on synthetic records, and
the recorded timelines themselves (results/mla_timeline.json)."""
import pytest

from tilelang_tutorial import results
from tilelang_tutorial.lessons.mla import timeline as MT


def _rec(kv, split, attention, combine=4.5):
    t = {"launch_gap": 1.5, "attention": attention}
    if split > 1:
        t.update(between_kernels=1.2, combine=combine)
    t["span"] = sum(t.values())
    blocks = MT.blocks_per_cta(kv, split)
    return {"config": {"num_split": split, "schedule": "seesaw"}, "timeline_us": t,
            "shape": {"kv_len": kv, "blocks_per_cta": blocks}, "value": t["span"] + 0.6,
            "tflops": 2 * 128 * kv * 1088 / ((t["span"] + 0.6) * 1e-6) / 1e12}


def test_blocks_per_cta():
    assert [MT.blocks_per_cta(kv, 64) for kv in (4096, 8192, 16384, 32768)] == [1, 2, 4, 8]
    assert MT.blocks_per_cta(64, 1) == 1 and MT.blocks_per_cta(65, 1) == 2


def test_fit_recovers_a_linear_model():
    recs = [_rec(64, 1, 9.0)] + [_rec(kv, 64, 10.0 + 2.25 * MT.blocks_per_cta(kv, 64))
                                for kv in (4096, 8192, 16384, 32768)]
    fixed, per_block = MT.fit_attention(recs)          # the split=1 record is not part of the fit
    assert fixed == pytest.approx(10.0) and per_block == pytest.approx(2.25)
    with pytest.raises(ValueError, match="two different"):
        MT.fit_attention(recs[:2])


def test_summary_states_the_budget_of_the_goal():
    recs = [_rec(kv, 64, 10.0 + 2.2 * MT.blocks_per_cta(kv, 64)) for kv in (8192, 32768)]
    text = MT.summarize(recs)
    budget = 2 * 128 * 32768 * 1088 / 300e12 * 1e6
    assert MT.goal_budget_us(32768) == pytest.approx(budget)
    assert f"allows {budget:.1f} us" in text and "10.0 us + 2.20 us per KV block" in text


def test_figure_draws_every_call():
    import matplotlib
    matplotlib.use("Agg")
    recs = [_rec(64, 1, 9.0), _rec(8192, 64, 14.4), _rec(32768, 64, 27.6)]
    fig = MT.figure(recs)
    ax = fig.axes[0]
    assert len(ax.get_yticks()) == 3
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"attention kernel", "combine kernel"}


def test_recorded_timelines_add_up():
    recs = results.find(MT.SUITE)
    assert {r["config"]["num_split"] for r in recs} >= {1, 64}
    for r in recs:
        t = r["timeline_us"]
        parts = sum(v for k, v in t.items() if k != "span")
        assert parts == pytest.approx(t["span"], rel=0.1), r["shape"]
        assert r["correctness"]["ok"] and t["span"] <= r["value"] * 1.1
