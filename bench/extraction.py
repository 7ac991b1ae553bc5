"""Extraction speed: crawlstack's rules engine against the same selectors written with parsel, on one core.

The corpus is fixed and deterministic: ``--pages`` generated product pages
(seeded RNG, 30-80 KB each, UTF-8 with some non-ASCII text), each with a
header and footer of navigation links, a breadcrumb, a gallery, a price
box, a description, a specification table, related products and reviews.
The same nine fields and one set of links are extracted three ways:

* ``crawlstack``: ``Page(url, body, content_type)`` from the response bytes
  (decoding like a browser: the Content-Type charset here), then the
  mapping's ``extract`` and ``links``, the rules engine's work per page in
  extract.  The mapping is compiled once, before timing, as the extract
  Lambda does.  Not included: the extractor's ``<meta name="robots">``
  check and the WARC reading around it.
* ``parsel+decode``: what Scrapy does with the same bytes: decode them with
  w3lib's ``html_to_unicode`` (as ``TextResponse.text`` does), then
  ``Selector(text=...)``, the same XPath and CSS selectors (``.get()``,
  ``.getall()``, ``.re_first()``), and the same post-processing in plain
  Python; relative URLs resolved against w3lib's ``get_base_url``, as
  ``response.urljoin`` does.
* ``parsel``: the same, from text already decoded (decoding not timed): the
  most favourable case for parsel.

Links on both sides go through crawlstack's ``resolve_link`` (urljoin and
canonicalisation), so the two give identical values; the benchmark checks
that every field and link agrees on every page before timing anything.

Each repetition runs every engine over the whole corpus once, in chunks of
``--chunk`` pages: the engines take turns chunk by chunk (who goes first
rotates), so a slow spell on a shared or virtual machine costs every engine
alike.  The figures are pages per CPU-second of this process
(``time.process_time``), best and median over the repetitions, plus the
best wall-clock rate.  The process is pinned to one CPU where the OS allows
it, so it runs on one core.  ``--only`` runs one engine untimed, for
counting instructions under callgrind (BENCHMARKS.md shows how).

Then crawlstack against its own earlier code (``--baseline REF``, default
``BASELINE``): the same corpus through the rules engine and through the
whole ``Extractor.extract_object``, current and baseline each in fresh
interpreters of their own, taking turns every repetition: CPU time per page,
peak memory and their ratios (bench/baseline.py says how).

    python bench/extraction.py [--pages 500] [--reps 7] [--chunk 25] [--seed 20261122]
                               [--out bench/results/extraction.json] [--only ENGINE] [--baseline REF|none]
"""

from __future__ import annotations

import argparse
import html
import os
import platform
import random
import re
import statistics
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import baseline
from common import cpu_model, figure, load_average
from common import report as write_report
from lxml import etree
from parsel import Selector
from w3lib.encoding import html_to_unicode
from w3lib.html import get_base_url

from crawlstack.rules.mapping import Mapping, compile_mapping
from crawlstack.rules.page import Page
from crawlstack.urls import InvalidURL, resolve_link

CONTENT_TYPE = "text/html; charset=utf-8"
ENGINES = ("crawlstack", "parsel+decode", "parsel")
# The code the current extraction is judged against: 9296488 is the parent commit of
# issue 27's work (field values capped while built, markup parsed to a node cap), whose
# target is time per page and peak memory within 10% of it.  Bump it when a later change is to be judged.
BASELINE = "9296488"
SITE = "https://shop.example"

# --- the corpus -------------------------------------------------------------------
_VOCABULARY = (
    "anchor brass harbour tide lantern rope canvas oak teak compass chart keel mast sail hull deck"
    " cabin galley bow stern port starboard buoy pier quay dock crane barge ferry schooner ketch"
    " weathered polished sturdy handmade classic compact heavy light waterproof durable vintage"
    " modern elegant practical reliable coastal northern southern tidal salty bright dark warm"
    " the a of with and for in on by to from at over under near beside between every each"
    " café naïve façade fjord smörgåsbord crème brûlée déjà über"
)
WORDS = _VOCABULARY.split()
CATEGORIES = ["Lighting", "Rope & Rigging", "Navigation", "Deck Hardware", "Galley", "Cabin", "Clothing", "Books"]


def words(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def product_page(rnd: random.Random, i: int) -> tuple[str, bytes]:
    """One product page of 30-80 KB, and its URL."""
    target = rnd.randint(30_000, 80_000)
    name = words(rnd, rnd.randint(2, 5)).title()
    url = f"{SITE}/p/{slug(name)}-{i}.html"
    category = rnd.choice(CATEGORIES)
    sub = words(rnd, 2).title()
    price = rnd.randint(199, 250_000) / 100
    parts: list[str] = []
    add = parts.append
    add(
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>{html.escape(name)} | Harbour Supply</title>\n"
        f"<meta name='description' content='{html.escape(words(rnd, 25))}'>\n"
        f"<meta property='og:title' content='{html.escape(name)}'>\n"
        f"<link rel='canonical' href='{url}'>\n"
        "<link rel='stylesheet' href='/static/css/main.3f9a1c.css'>\n"
        "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
        + "".join(f"var v{k}='{words(rnd, 6)}';" for k in range(30))
        + "</script>\n</head>\n<body class='product-page'>\n"
    )
    add("<header class='site-header'><nav class='main-nav'><ul>")
    for cat in CATEGORIES:
        add(f"<li class='menu'><a href='/c/{slug(cat)}/'>{html.escape(cat)}</a><ul class='sub'>")
        for _ in range(6):
            label = words(rnd, 2).title()
            add(f"<li><a href='/c/{slug(cat)}/{slug(label)}/'>{html.escape(label)}</a></li>")
        add("</ul></li>")
    add("</ul></nav></header>\n<main>\n")
    add(
        "<nav class='breadcrumb'><ol>"
        "<li><a href='/'> Home </a></li>"
        f"<li><a href='/c/{slug(category)}/'>\n  {html.escape(category)}\n</a></li>"
        f"<li><a href='/c/{slug(category)}/{slug(sub)}/'>{html.escape(sub)}</a></li>"
        f"<li class='current'>{html.escape(name)}</li></ol></nav>\n"
    )
    add("<div class='product'>\n<div class='gallery'>")
    add(f"<img class='main' src='/media/{i}/main.jpg' alt='{html.escape(name)}'>")
    for k in range(rnd.randint(3, 8)):
        add(f"<img class='thumb' src='/media/{i}/thumb-{k}.jpg' alt=''>")
    add("</div>\n<div class='summary'>\n")
    add(f"<h1 class='product-title'>\n    {html.escape(name)}\n  </h1>\n")
    add(
        f"<div class='product-meta'><span class='sku'>  SKU-{i:06d}-{rnd.randint(10, 99)} </span>"
        f"<span class='availability'>{rnd.choice(['In stock', 'Ships in 3 days', 'Last few'])}</span></div>\n"
    )
    add(
        f"<div class='price-box'><span class='price'>${price:,.2f}</span>"
        f"<span class='was'>${price * 1.2:,.2f}</span></div>\n"
    )
    reviews = rnd.randint(0, 4000)
    add(
        "<div itemprop='aggregateRating' itemscope itemtype='https://schema.org/AggregateRating'>"
        f"<meta itemprop='ratingValue' content='{rnd.randint(10, 50) / 10}'>"
        f"<meta itemprop='reviewCount' content='{reviews}'></div>\n"
        f"<p class='reviews-summary'><span class='count'>{reviews:,} reviews</span></p>\n"
    )
    add("<div class='description'>")
    for _ in range(rnd.randint(3, 7)):
        add(
            f"<p>{words(rnd, 30)} <b>{words(rnd, 3)}</b> {words(rnd, 20)}\n"
            f"<a href='/guides/{slug(words(rnd, 2))}.html'>{words(rnd, 3)}</a> {words(rnd, 15)}.</p>\n"
        )
    add("</div>\n<table class='specs'><tbody>")
    for _ in range(rnd.randint(10, 25)):
        add(f"<tr><th> {html.escape(words(rnd, 2).title())} </th><td>{html.escape(words(rnd, 4))}</td></tr>")
    add("</tbody></table>\n</div></div>\n<section class='related'><h2>You may also like</h2><ul>")
    for k in range(rnd.randint(12, 24)):
        other = rnd.randint(0, 100_000)
        label = words(rnd, 3).title()
        href = rnd.choice(
            [
                f"/p/{slug(label)}-{other}.html",
                f"/p/{slug(label)}-{other}.html?ref=related&pos={k}",
                f"{SITE}/p/{other}.html#top",
            ]
        )
        add(
            f"<li class='card'><a class='card-link' href='{html.escape(href)}'>"
            f"<img src='/media/{other}/thumb.jpg' alt=''><span>{html.escape(label)}</span></a></li>"
        )
    add("</ul></section>\n<section class='reviews'>\n")
    footer = (
        "</section>\n</main>\n<footer><ul>"
        + "".join(f"<li><a href='/info/{slug(words(rnd, 2))}.html'>{words(rnd, 2)}</a></li>" for _ in range(60))
        + "</ul><p>© Harbour Supply — all prices include VAT</p></footer>\n</body>\n</html>\n"
    )
    size = sum(len(p.encode("utf-8")) for p in parts) + len(footer.encode("utf-8"))
    while size < target:
        review = (
            f"<article class='review'><h3>{html.escape(words(rnd, 4))}</h3>"
            f"<p class='by'>by <span class='author'>{words(rnd, 2).title()}</span> on "
            f"<time datetime='2025-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}'>a day</time></p>"
            f"<div class='stars' data-stars='{rnd.randint(1, 5)}'></div>"
            f"<p>{words(rnd, rnd.randint(20, 80))}</p></article>\n"
        )
        parts.append(review)
        size += len(review.encode("utf-8"))
    parts.append(footer)
    return url, "".join(parts).encode("utf-8")


def corpus(pages: int, seed: int) -> list[tuple[str, bytes]]:
    rnd = random.Random(seed)
    return [product_page(rnd, i) for i in range(pages)]


# --- crawlstack -------------------------------------------------------------------
def _p(kind: str, **parameters: Any) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


MAPPING: dict[str, Any] = {
    "name": "product",
    "url_patterns": [{"type": "regex", "pattern": r"^https://shop\.example/p/"}],
    "url_parsers": [
        {"description": "related products", "processors": [_p("css", selector=".related a.card-link::attr(href)")]}
    ],
    "fields": [
        {"name": "title", "processors": [_p("css", selector="h1.product-title::text"), _p("normalize_space")]},
        {
            "name": "price",
            "processors": [
                _p("xpath", expression="//div[@class='price-box']/span[@class='price']/text()"),
                _p("to_number"),
            ],
        },
        {"name": "sku", "processors": [_p("css", selector=".product-meta .sku::text"), _p("trim")]},
        {
            "name": "rating",
            "processors": [
                _p("xpath", expression="//div[@itemprop='aggregateRating']/meta[@itemprop='ratingValue']/@content"),
                _p("to_number"),
            ],
        },
        {
            "name": "review_count",
            "processors": [
                _p("css", selector=".reviews-summary .count::text"),
                _p("regex", pattern=r"(\d[\d,]*)"),
                _p("to_number"),
            ],
        },
        {
            "name": "breadcrumbs",
            "multiple": True,
            "processors": [_p("xpath", expression="//nav[@class='breadcrumb']//a/text()"), _p("normalize_space")],
        },
        {"name": "image", "processors": [_p("css", selector=".gallery img.main::attr(src)"), _p("absolute_url")]},
        {"name": "description", "processors": [_p("css", selector="div.description"), _p("normalize_space")]},
        {
            "name": "specs",
            "multiple": True,
            "processors": [_p("xpath", expression="//table[@class='specs']//th/text()"), _p("trim")],
        },
    ],
}


def crawlstack_extractor() -> Callable[[str, bytes], dict[str, Any]]:
    mapping: Mapping = compile_mapping("bench", MAPPING)

    def run(url: str, body: bytes) -> dict[str, Any]:
        page = Page(url, body, CONTENT_TYPE)
        return {"fields": mapping.extract(page), "links": mapping.links(page)}

    return run


# --- parsel -----------------------------------------------------------------------
def _space(text: str | None) -> str | None:
    return " ".join(text.split()) if text is not None else None


def _number(text: str | None) -> int | float | None:
    if text is None:
        return None
    text = text.strip().lstrip("$").replace(",", "")
    try:
        return int(text)
    except ValueError:
        return float(text)


def parsel_fields(url: str, text: str) -> dict[str, Any]:
    sel = Selector(text=text)
    base = get_base_url(text, url)  # as Scrapy's response.urljoin
    image = sel.css(".gallery img.main::attr(src)").get()
    review_count = sel.css(".reviews-summary .count::text").re_first(r"(\d[\d,]*)")
    links: dict[str, None] = {}
    for href in sel.css(".related a.card-link::attr(href)").getall():
        try:
            links.setdefault(resolve_link(base, href))
        except InvalidURL:
            continue
    return {
        "fields": {
            "title": _space(sel.css("h1.product-title::text").get()),
            "price": _number(sel.xpath("//div[@class='price-box']/span[@class='price']/text()").get()),
            "sku": (sel.css(".product-meta .sku::text").get() or "").strip() or None,
            "rating": _number(
                sel.xpath("//div[@itemprop='aggregateRating']/meta[@itemprop='ratingValue']/@content").get()
            ),
            "review_count": _number(review_count),
            "breadcrumbs": [" ".join(t.split()) for t in sel.xpath("//nav[@class='breadcrumb']//a/text()").getall()]
            or None,
            "image": resolve_absolute(base, image),
            "description": _space(sel.css("div.description").xpath("string()").get()),
            "specs": [t.strip() for t in sel.xpath("//table[@class='specs']//th/text()").getall()] or None,
        },
        "links": list(links),
    }


def resolve_absolute(base: str, href: str | None) -> str | None:
    return urljoin(base, href.strip()) if href and href.strip() else None


def parsel_extractor(decode: bool) -> Callable[[str, Any], dict[str, Any]]:
    """From the response bytes, decoded as Scrapy does (``decode``), or from text decoded beforehand."""
    if not decode:
        return parsel_fields

    def run(url: str, body: bytes) -> dict[str, Any]:
        _, text = html_to_unicode(CONTENT_TYPE, body)
        return parsel_fields(url, text)

    return run


# --- timing -----------------------------------------------------------------------
def pin_one_cpu() -> int | None:
    """Pin this process to one CPU (the last one it may use); None where the OS cannot."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def time_pass(run: Callable[[str, Any], Any], pages: list[tuple[str, Any]]) -> tuple[float, float]:
    """Seconds for one pass: (CPU time of this process, wall time)."""
    cpu, wall = time.process_time(), time.perf_counter()
    for url, data in pages:
        run(url, data)
    return time.process_time() - cpu, time.perf_counter() - wall


def paired_ratio(theirs: list[float], ours: list[float]) -> float:
    return round(statistics.median(t / o for t, o in zip(theirs, ours, strict=True)), 3)


def contract(report: dict[str, Any], results: dict[str, dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """The method, figures and notes of bench/results/extraction.json (see bench/common.py)."""
    corpus_info = report["corpus"]
    method = (
        f"Pages per CPU-second of one process pinned to one core, over {corpus_info['pages']} generated product "
        f"pages (median {corpus_info['page_kb_median']} KB), {report['fields']} fields and the links each, best "
        f"and median of {report['reps']} passes; the engines take turns every {report['chunk']} pages, and the "
        "ratios are the median of the per-pass ratios."
    )
    vs_decode, vs_text = report["crawlstack_vs_parsel_decode"], report["crawlstack_vs_parsel"]
    figures = [
        figure(f"{name} pages/CPU-s, {kind}", r[f"{kind}_pages_per_s"], "pages/s")
        for name, r in results.items()
        for kind in ("best", "median")
    ]
    figures += [
        figure("crawlstack / parsel+decode speed", vs_decode, "x", "≥ 1.0x", vs_decode >= 1.0),
        figure("crawlstack / parsel speed (text decoded untimed)", vs_text, "x", "≥ 1.0x", vs_text >= 1.0),
    ]
    versions = ", ".join(f"{name} {v}" for name, v in report["versions"].items())
    notes = (
        "`crawlstack`: `Page` from the response bytes, then the compiled mapping's `extract` and `links`; "
        "`parsel+decode`: w3lib's `html_to_unicode` on the same bytes (as Scrapy's `TextResponse.text`), then "
        "`Selector` with the same selectors and the same post-processing; `parsel`: the same from text decoded "
        f"beforehand, untimed. Every field and link agreed on every page before timing. {versions}. "
        "The corpus, callgrind instruction counts and where crawlstack's time goes are described under "
        "the earlier extraction measurements below."
    )
    return method, figures, notes


def against_baseline(
    ref: str,
    pages: list[tuple[str, bytes]],
    reps: int,
    report: dict[str, Any],
    figures: list[dict[str, Any]],
    notes: str,
) -> tuple[list[dict[str, Any]], str]:
    """Current crawlstack against ``ref``'s (bench/baseline.py): figures and notes added, details in ``report``."""
    print(f"crawlstack against {ref}: {reps} reps, fresh interpreters, rules engine and extract_object")
    try:
        found = baseline.compare(ref, pages, MAPPING, CONTENT_TYPE, reps)
    except baseline.BaselineUnavailable as exc:
        print(f"baseline not measured: {exc}")
        report["baseline_comparison"] = {"ref": ref, "failed": str(exc)}
        return [*figures, baseline.unavailable_figure(ref, str(exc))], notes
    report["baseline_comparison"] = found
    print("\n".join(baseline.report_lines(found)))
    return [*figures, *baseline.figures(found, ref)], f"{notes} {baseline.notes(found)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=500, help="pages in the corpus (default 500)")
    parser.add_argument("--reps", type=int, default=7, help="timed passes over the corpus per engine (default 7)")
    parser.add_argument("--seed", type=int, default=20261122, help="corpus RNG seed")
    parser.add_argument("--chunk", type=int, default=25, help="pages an engine runs before the next takes its turn")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "extraction.json"))
    parser.add_argument(
        "--only",
        choices=ENGINES,
        help="run just this engine --reps times: no check, no timing, no report; for counting instructions"
        " under callgrind (--reps 0 gives the baseline to subtract)",
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        help=f"git ref whose crawlstack/ the current code is measured against, in the same run (default {BASELINE},"
        " the parent commit of issue 27's work); 'none' skips it",
    )
    args = parser.parse_args(argv)
    if args.pages < 1 or args.chunk < 1 or (args.reps < 1 and not args.only):
        parser.error("--pages, --chunk and --reps must be at least 1")

    load_before = load_average()
    cpu = pin_one_cpu()
    pages = corpus(args.pages, args.seed)
    texts = [(url, html_to_unicode(CONTENT_TYPE, body)[1]) for url, body in pages]
    sizes = [len(body) for _, body in pages]
    engines: dict[str, tuple[Callable[[str, Any], Any], list[tuple[str, Any]]]] = {
        "crawlstack": (crawlstack_extractor(), pages),
        "parsel+decode": (parsel_extractor(decode=True), pages),
        "parsel": (parsel_extractor(decode=False), texts),
    }
    if args.only:
        run, data = engines[args.only]
        for _ in range(args.reps):
            for url, page in data:
                run(url, page)
        return 0

    # Same values on every page, or the comparison means nothing (also the warm-up pass).
    for (url, body), (_, text) in zip(pages, texts, strict=True):
        ours = engines["crawlstack"][0](url, body)
        for name in ("parsel+decode", "parsel"):
            run, data = engines[name]
            theirs = run(url, body if data is pages else text)
            if ours != theirs:
                raise SystemExit(f"{name} disagrees with crawlstack on {url}:\n{ours}\n{theirs}")
    sample = engines["crawlstack"][0](*pages[0])
    if any(value is None for value in sample["fields"].values()) or not sample["links"]:
        raise SystemExit(f"a field or the links came out empty: {sample}")

    cpu_times: dict[str, list[float]] = {name: [] for name in engines}
    wall_times: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for rep in range(args.reps):
        cpu_rep = dict.fromkeys(names, 0.0)
        wall_rep = dict.fromkeys(names, 0.0)
        for k, start in enumerate(range(0, len(pages), args.chunk)):
            first = (rep + k) % len(names)
            for name in names[first:] + names[:first]:
                run, data = engines[name]
                cpu_s, wall_s = time_pass(run, data[start : start + args.chunk])
                cpu_rep[name] += cpu_s
                wall_rep[name] += wall_s
        for name in names:
            cpu_times[name].append(cpu_rep[name])
            wall_times[name].append(wall_rep[name])

    # Pages per CPU-second: what one core does, and steadier than wall time
    # when other processes share the machine (wall time is kept too).
    results: dict[str, dict[str, Any]] = {
        name: {
            "best_pages_per_s": round(len(pages) / min(t), 1),
            "median_pages_per_s": round(len(pages) / statistics.median(t), 1),
            "best_mb_per_s": round(sum(sizes) / min(t) / 1e6, 2),
            "best_wall_pages_per_s": round(len(pages) / min(wall_times[name]), 1),
            "cpu_seconds": [round(x, 4) for x in t],
            "wall_seconds": [round(x, 4) for x in wall_times[name]],
        }
        for name, t in cpu_times.items()
    }
    report: dict[str, Any] = {
        "machine_detail": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "pinned_to_cpu": cpu,
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "platform": platform.platform(),
        },
        "versions": {
            "lxml": version("lxml"),
            "libxml2": ".".join(map(str, etree.LIBXML_VERSION)),
            "parsel": version("parsel"),
            "cssselect": version("cssselect"),
            "w3lib": version("w3lib"),
        },
        "corpus": {
            "pages": len(pages),
            "seed": args.seed,
            "total_mb": round(sum(sizes) / 1e6, 2),
            "page_kb_min": round(min(sizes) / 1e3, 1),
            "page_kb_median": round(statistics.median(sizes) / 1e3, 1),
            "page_kb_max": round(max(sizes) / 1e3, 1),
        },
        "fields": len(MAPPING["fields"]),
        "reps": args.reps,
        "chunk": args.chunk,
        "results": results,
        # crawlstack's speed over the other's within each repetition, median over repetitions.
        "crawlstack_vs_parsel_decode": paired_ratio(cpu_times["parsel+decode"], cpu_times["crawlstack"]),
        "crawlstack_vs_parsel": paired_ratio(cpu_times["parsel"], cpu_times["crawlstack"]),
    }

    corpus_info = report["corpus"]
    print(
        f"{corpus_info['pages']} pages, {corpus_info['total_mb']} MB (median {corpus_info['page_kb_median']} KB), "
        f"{report['fields']} fields + links, {args.reps} reps, CPU {cpu if cpu is not None else 'not pinned'}"
    )
    print("pages per CPU-second (best, median), MB per CPU-second (best), pages per wall-second (best)")
    print(f"{'engine':<15} {'best':>8} {'median':>8} {'MB/s':>7} {'wall':>8}")
    for name, r in results.items():
        print(
            f"{name:<15} {r['best_pages_per_s']:>8,.1f} {r['median_pages_per_s']:>8,.1f} {r['best_mb_per_s']:>7.2f}"
            f" {r['best_wall_pages_per_s']:>8,.1f}"
        )
    print(
        f"crawlstack's speed / parsel+decode's: {report['crawlstack_vs_parsel_decode']:.3f}; "
        f"/ parsel's: {report['crawlstack_vs_parsel']:.3f} (median of per-repetition ratios)"
    )
    method, figures, notes = contract(report, results)
    if args.baseline.lower() != "none":
        figures, notes = against_baseline(args.baseline, pages, args.reps, report, figures, notes)
    out = write_report(
        "extraction", method, figures, load_before=load_before, path=Path(args.out), notes=notes, **report
    )
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
