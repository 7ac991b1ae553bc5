"""``report.html``: one self-contained page of a crawl's plots, drawn with Plotly.

The page embeds plotly.js once and each plot's data as JSON, so it makes
no network request and opens from a file.  Every string that came from a
crawled page (hosts, reasons, mapping and field names) is HTML-escaped
before Plotly sees it: Plotly renders a subset of HTML in labels, and
escaped text is shown as the text it is.  Plotly's JSON also escapes ``<``,
so no string can close the script that holds it.
"""

from __future__ import annotations

import html
import itertools
import statistics
from datetime import UTC, datetime
from typing import Any

from crawlstack.report.facts import CrawlFacts

OUTCOME_COLOURS = {"fetched": "#2ca02c", "skipped": "#7f7f7f", "failed": "#d62728", "dropped": "#ff7f0e"}
# Points a line of pages over time is thinned to.
MAX_LINE_POINTS = 400
# Requests a host's timeline draws at most (the smallest gap is still taken over all of them).
MAX_TIMELINE_POINTS = 1000
TOP_BARS = 15
# Nothing may be fetched: a request the page tried would be refused, and show as an error in the console.
CSP = "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:"


def text(value: object) -> str:
    return html.escape(str(value), quote=True)


def when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds")


def figures(facts: CrawlFacts) -> list[tuple[str, str, Any]]:
    """Each plot's section id, title and Plotly figure (None: no data for it)."""
    import plotly.graph_objects as go

    return [
        (
            "pages",
            "URLs requested over time, by outcome (robots.txt skips and drops have no request)",
            _pages_over_time(go, facts),
        ),
        ("statuses", "HTTP status codes", _statuses(go, facts)),
        ("timeline", "Requests per host over time", _timeline(go, facts)),
        ("gaps", "Smallest gap between a host's requests, beside the delay", _gaps(go, facts)),
        ("depths", "URLs by depth", _depths(go, facts)),
        ("coverage", "Field coverage per mapping: share of records with the field non-empty", _coverage(go, facts)),
        ("reasons", "Top reasons URLs were dropped, skipped or failed", _reasons(go, facts)),
        ("slowest", "Slowest hosts: median seconds a response took", _slowest(go, facts)),
    ]


def render(facts: CrawlFacts) -> str:
    """The whole page."""
    from plotly.offline import get_plotlyjs

    sections = []
    for key, title, figure in figures(facts):
        if figure is None:
            body = '<p class="empty">Nothing to plot: the crawl has no data for this.</p>'
        else:
            figure.update_layout(margin={"l": 10, "r": 10, "t": 10, "b": 10}, template="plotly_white")
            body = figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})
        sections.append(f'<section id="{key}"><h2>{title}</h2>{body}</section>')
    outcomes = ", ".join(f"{text(o)} {n}" for o, n in facts.outcomes.most_common()) or "no URLs"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>crawlstack report: {text(facts.crawl_id)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}}
section{{margin:2em 0}}h2{{font-size:1.1em}}.empty{{color:#777}}</style>
<script>{get_plotlyjs()}</script></head>
<body><h1>Crawl {text(facts.crawl_id)}</h1>
<p>From {text(facts.source)}: {sum(facts.outcomes.values())} URLs ({outcomes});
{sum(c.records for c in facts.coverage.values())} records.</p>
{"".join(sections)}
</body></html>
"""


def _pages_over_time(go: Any, facts: CrawlFacts) -> Any:
    if not facts.ended_at:
        return None
    figure = go.Figure()
    for outcome, times in sorted(facts.ended_at.items()):
        times = sorted(times)
        step = max(1, len(times) // MAX_LINE_POINTS)
        points = list(range(0, len(times), step))
        if points[-1] != len(times) - 1:
            points.append(len(times) - 1)
        figure.add_trace(
            go.Scatter(
                x=[when(times[i]) for i in points],
                y=[i + 1 for i in points],
                mode="lines+markers",
                name=text(outcome),
                line={"color": OUTCOME_COLOURS.get(outcome)},
            )
        )
    figure.update_layout(xaxis_title="time (UTC)", yaxis_title="URLs (cumulative)", height=350)
    return figure


def _statuses(go: Any, facts: CrawlFacts) -> Any:
    if not facts.statuses:
        return None
    codes = sorted(facts.statuses)
    bars = go.Bar(x=[text(c) for c in codes], y=[facts.statuses[c] for c in codes], marker_color="#1f77b4")
    figure = go.Figure(bars)
    figure.update_layout(xaxis_type="category", xaxis_title="status", yaxis_title="URLs", height=300)
    return figure


def _timeline(go: Any, facts: CrawlFacts) -> Any:
    hosts = facts.timeline_hosts()
    if not hosts:
        return None
    figure = go.Figure()
    by_outcome: dict[str, tuple[list[str], list[str], list[str]]] = {}
    for host in hosts:
        requests = sorted(facts.requests[host], key=lambda r: r.started)
        # A long-lived host's marks would only overlap: every k-th is drawn, each with its own gap.
        every = max(1, len(requests) // MAX_TIMELINE_POINTS)
        for index in range(0, len(requests), every):
            request = requests[index]
            xs, ys, hover = by_outcome.setdefault(request.outcome, ([], [], []))
            xs.append(when(request.started))
            ys.append(text(host))
            gap = "first request"
            if index:
                gap = f"{request.started - requests[index - 1].started:.3f} s after the last"
            hover.append(f"{text(request.status or '')} {gap}")
    for outcome, (xs, ys, hover) in sorted(by_outcome.items()):
        figure.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=text(outcome),
                text=hover,
                hovertemplate="%{y}<br>%{x}<br>%{text}<extra></extra>",
                marker={
                    "color": OUTCOME_COLOURS.get(outcome, "#9467bd"),
                    "size": 12,
                    "symbol": "line-ns-open",
                    "line": {"width": 2},
                },
            )
        )
    figure.update_layout(xaxis_title="request started (UTC)", height=max(250, 22 * len(hosts) + 120))
    figure.update_yaxes(type="category", categoryorder="array", categoryarray=[text(h) for h in reversed(hosts)])
    return figure


def _gaps(go: Any, facts: CrawlFacts) -> Any:
    gaps = {}
    for host in facts.timeline_hosts():
        starts = sorted(r.started for r in facts.requests[host])
        if len(starts) > 1:
            gaps[host] = min(b - a for a, b in itertools.pairwise(starts))
    if not gaps:
        return None
    hosts = sorted(gaps, key=lambda h: gaps[h])
    figure = go.Figure(
        go.Bar(
            x=[gaps[h] for h in hosts],
            y=[text(h) for h in hosts],
            orientation="h",
            name="smallest gap",
            marker_color="#1f77b4",
        )
    )
    if facts.delay:
        figure.add_vline(
            x=facts.delay, line_dash="dash", line_color="#d62728", annotation_text=f"delay {facts.delay:g} s"
        )
    figure.update_layout(xaxis_title="seconds", height=max(250, 22 * len(hosts) + 120))
    return figure


def _depths(go: Any, facts: CrawlFacts) -> Any:
    if not facts.depths:
        return None
    depths = sorted(facts.depths)
    figure = go.Figure(go.Bar(x=depths, y=[facts.depths[d] for d in depths], marker_color="#1f77b4"))
    figure.update_layout(xaxis_title="depth", yaxis_title="URLs", xaxis_dtick=1, height=300)
    return figure


def _coverage(go: Any, facts: CrawlFacts) -> Any:
    mappings = sorted(m for m, c in facts.coverage.items() if c.records)
    names = sorted({name for m in mappings for name in facts.coverage[m].filled})
    if not mappings or not names:
        return None
    shares = [
        [
            facts.coverage[m].filled[n] / facts.coverage[m].records if n in facts.coverage[m].filled else None
            for n in names
        ]
        for m in mappings
    ]
    labels = [[("" if s is None else f"{s:.0%}") for s in row] for row in shares]
    heatmap = go.Heatmap(
        z=shares,
        x=[text(n) for n in names],
        y=[f"{text(m)} ({facts.coverage[m].records})" for m in mappings],
        zmin=0,
        zmax=1,
        colorscale="Greens",
        text=labels,
        texttemplate="%{text}",
        hovertemplate="%{y}<br>%{x}: %{text}<extra></extra>",
    )
    figure = go.Figure(heatmap)
    figure.update_layout(height=max(250, 40 * len(mappings) + 150))
    return figure


def _reasons(go: Any, facts: CrawlFacts) -> Any:
    ranked = sorted(
        (
            (count, outcome, reason)
            for outcome, counts in facts.endings.reasons.items()
            for reason, count in counts.items()
        ),
        reverse=True,
    )[:TOP_BARS]
    if not ranked:
        return None
    figure = go.Figure()
    for outcome in sorted({o for _, o, _ in ranked}):
        rows = [(c, r) for c, o, r in reversed(ranked) if o == outcome]
        figure.add_trace(
            go.Bar(
                x=[c for c, _ in rows],
                y=[text(_label(f"{outcome}: {r}", rank)) for rank, (_, r) in enumerate(rows)],
                orientation="h",
                name=text(outcome),
                marker_color=OUTCOME_COLOURS.get(outcome),
            )
        )
    figure.update_layout(xaxis_title="URLs", height=max(250, 24 * len(ranked) + 120))
    figure.update_yaxes(automargin=True)
    return figure


def _label(reason: str, rank: int, width: int = 120) -> str:
    """A bar's label: a long reason cut, and made unique, or two bars would share one category."""
    return reason if len(reason) <= width else f"{reason[: width - 6]}… ({rank})"


def _slowest(go: Any, facts: CrawlFacts) -> Any:
    medians = {}
    for host, requests in facts.requests.items():
        seconds = [r.seconds for r in requests if r.seconds is not None and r.seconds >= 0]
        if seconds:
            medians[host] = (statistics.median(seconds), len(seconds))
    if not medians:
        return None
    hosts = sorted(medians, key=lambda h: medians[h][0], reverse=True)[:TOP_BARS]
    hosts.reverse()
    figure = go.Figure(
        go.Bar(
            x=[medians[h][0] for h in hosts],
            y=[text(h) for h in hosts],
            orientation="h",
            text=[f"{medians[h][1]} requests" for h in hosts],
            hovertemplate="%{y}: %{x:.3f} s, %{text}<extra></extra>",
            marker_color="#9467bd",
        )
    )
    figure.update_layout(xaxis_title="seconds (median)", height=max(250, 24 * len(hosts) + 120))
    return figure
