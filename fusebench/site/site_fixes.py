"""What the published asv site shows first, fixed after ``asv publish`` (``html/`` post-processing).

asv 0.6.6's page, as published, opens every graph at each parameter's first value (asv's
default selection, ``graphdisplay.js``: "up to 8 lines", all backends and then only the first
shape and dtype), i.e. the smallest shape, the launch-bound case; its grid tiles are titled with
the bare method name (``Gelu.track_bandwidth``), no unit; and against a category axis (x-axis
"shape", "backend" or "dtype": bars) it draws only the middle series (``compile`` of five).

That last fault is the vendored plot library's, not asv's: flot-orderbars 1.0.0 (the same file
asv's CDN URL serves) converts a bar's border width from pixels to x units with the spread of the
series' *raw* x values (``getAxeMinMaxValues``); on flot's categories axis those are labels,
so the spread is NaN (``"16384x1024"``) or absurd (``"67108864" - "1024"`` as numbers), and every
bar but the centred one is shifted to NaN or far off the axis. :func:`patch_orderbars` makes the
plugin measure a categories axis in categories (its labels count 0, 1, 2, ...), in the copy under
``html/vendor/`` (a site published with ``CDN=1`` keeps the CDN's file and the fault).

asv's benchmark list colours a "recent change" above +5 % red and below -5 % green, i.e. as if
every metric were lower-is-better (asv has no direction flag, asv #1617): a bandwidth gain
(``+102.0% (+16.5 GB/s)``) showed red like a regression. :func:`colour_by_direction` marks each
benchmark of a higher-is-better metric (``fusebench.metrictable``) in ``index.json`` and makes the
list colour a change by that direction: worse red, better green.

Each fix is one function; :func:`apply` runs them all (called at the end of
``fusebench.site.site.publish``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

#: The vendored plugin patched by :func:`patch_orderbars` (see ``fusebench.site.site.ASSETS``).
ORDERBARS = "vendor/flot-orderbars/js/jquery.flot.orderBars.js"
#: The line of flot-orderbars 1.0.0 after which the categories axis is measured in categories.
ORDERBARS_ANCHOR = "            var AxeSize = minMaxValues[1] - minMaxValues[0];\n"
ORDERBARS_PATCH = """\
            // fusebench patch (fusebench/site/site_fixes.py): on flot's categories axis the raw values
            // are labels, not numbers; measure the axis in categories (indices 0, 1, 2, ...).
            var fbAxis = isHorizontal ? plot.getYAxes()[0] : plot.getXAxes()[0];
            if (fbAxis && fbAxis.options.mode === "categories") {
                AxeSize = Math.max(Object.keys(fbAxis.categories || {}).length - 1, 1);
            }
"""
#: The script that opens each graph at its op's headline shape (written into the site's root).
DEFAULTS_JS = "fusebench-defaults.js"


def patch_orderbars(html_dir: Path) -> bool:
    """Patch ``html/vendor/.../jquery.flot.orderBars.js`` (see the module's docstring) and update
    the ``integrity`` hash of its ``<script>`` in ``index.html`` to the patched file's.

    Returns True when the file was patched now or before, False when there is no vendored copy
    (a site published with its CDN URLs).

    Raises:
        ValueError: the vendored file is not flot-orderbars 1.0.0 (its anchor line is missing).
    """
    path = html_dir / ORDERBARS
    if not path.is_file():
        return False
    text = path.read_text()
    if ORDERBARS_PATCH not in text:
        if text.count(ORDERBARS_ANCHOR) != 1:
            raise ValueError(f"{path} is not the flot-orderbars 1.0.0 this patch is for "
                             "(anchor line missing)")
        text = text.replace(ORDERBARS_ANCHOR, ORDERBARS_ANCHOR + ORDERBARS_PATCH)
        path.write_text(text)
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    index = html_dir / "index.html"
    page = index.read_text()
    tag = re.compile(r'(<script\b[^>]*\bsrc="' + re.escape(ORDERBARS) + r'"[^>]*\bintegrity=")[^"]*(")')
    index.write_text(tag.sub(lambda m: f"{m.group(1)}sha256-{digest}{m.group(2)}", page))
    return True


def headline_selection(index: dict, ops) -> dict[str, str]:
    """``{benchmark name: shape value as asv stores it}`` for each benchmark of an op with a
    headline shape that the published ``index.json`` (``index``) lists among its shapes.

    Args:
        index: asv's ``html/index.json``.
        ops: the ops (``fusebench.ops.OPS.values()``): ``Op.headline``, e.g. GELU 16384x16384.
    """
    from fusebench.asv.asvsuite import benchmark_name
    from fusebench.axes import shape_label

    out = {}
    for op in ops:
        if op.headline is None:
            continue
        value = repr(shape_label(op.headline))  # asv keeps parameter values as repr strings
        prefix = benchmark_name(op.name, "")
        for name, bm in index.get("benchmarks", {}).items():
            names = bm.get("param_names") or []
            if name.startswith(prefix) and "shape" in names and value in bm["params"][names.index("shape")]:
                out[name] = value
    return out


_DEFAULTS_TEMPLATE = """\
// Written by fusebench/site/site_fixes.py: open each graph at its op's headline shape (Op.headline)
// instead of asv's default, the first (smallest) shape. A graph address with no p-shape gets the
// headline's before asv reads it; a shape the reader picks is kept.
(function () {
  var HEADLINE = %s;
  function openAtHeadline() {
    var body = window.location.hash.replace(/^#/, "");
    var q = body.indexOf("?");
    var name = decodeURIComponent(q < 0 ? body : body.slice(0, q));
    var query = q < 0 ? "" : body.slice(q + 1);
    if (!HEADLINE.hasOwnProperty(name) || /(^|&)p-shape=/.test(query)) return;
    var add = "p-shape=" + encodeURIComponent(HEADLINE[name]);
    var path = q < 0 ? body : body.slice(0, q);
    history.replaceState(null, "", "#" + path + "?" + (query ? query + "&" : "") + add);
  }
  openAtHeadline();
  window.addEventListener("hashchange", openAtHeadline);  // registered before asv's handler
})();
"""


def open_at_headline(html_dir: Path, ops) -> dict[str, str]:
    """Write :data:`DEFAULTS_JS` and load it from ``index.html`` before asv's scripts.

    Returns the selection written (:func:`headline_selection`).
    """
    index = json.loads((html_dir / "index.json").read_text())
    selection = headline_selection(index, ops)
    (html_dir / DEFAULTS_JS).write_text(_DEFAULTS_TEMPLATE % json.dumps(selection, indent=1, sort_keys=True))
    page_path = html_dir / "index.html"
    page = page_path.read_text()
    tag = f'<script src="{DEFAULTS_JS}"></script>'
    if tag not in page:
        head = re.search(r"<head[^>]*>", page, re.IGNORECASE)
        if head is None:
            raise ValueError(f"{page_path} has no <head>")
        page = page[:head.end()] + "\n    " + tag + page[head.end():]
        page_path.write_text(page)
    return selection


def title(name: str, unit: str) -> str:
    """A grid tile's title: ``"Gelu.track_bandwidth [GB/s]"`` (no parentheses: asv's list view
    reads ``(...)`` in a title as the parameters)."""
    short = name.split(".", 1)[1] if "." in name else name
    return f"{short} [{unit}]" if unit else short


def titles_with_units(html_dir: Path) -> int:
    """Give each benchmark of ``html/index.json`` a ``pretty_name`` with its unit (the grid's tile
    titles); a ``pretty_name`` the suite set itself is kept. Returns the titles set."""
    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    count = 0
    for name, bm in index.get("benchmarks", {}).items():
        if not bm.get("pretty_name") or bm["pretty_name"] == name:
            bm["pretty_name"] = title(name, bm.get("unit", ""))
            count += 1
    path.write_text(json.dumps(index))
    return count


def escape_code(html_dir: Path) -> int:
    """HTML-escape each benchmark's ``code`` (and ``pretty_source``) in ``html/index.json``: asv's
    page shows them only as HTML tooltips (``html: true``), so source text such as
    ``class <locals>`` vanished and markup in another host's ``benchmarks.json`` would run. The
    escaped text displays as written. Returns the fields escaped."""
    import html as htmllib

    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    count = 0
    for bm in index.get("benchmarks", {}).values():
        for key in ("code", "pretty_source"):
            if isinstance(bm.get(key), str):
                bm[key] = htmllib.escape(bm[key])
                count += 1
    path.write_text(json.dumps(index))
    return count


#: A git tag name the site may show: asv's page writes each tag into HTML as it is
#: (``graphdisplay.js``, ``update_tags``), so a name with markup would run as script.
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+=,@-]{0,99}")


def drop_unsafe_tags(html_dir: Path) -> list[str]:
    """Leave out of ``html/index.json`` every git tag whose name is not :data:`TAG` (markup such
    as ``<img/src=x/onerror=...>``: a tag reaches a checkout by clone or pull). Returns the names
    left out, each cut to one line, for the caller to name."""
    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    tags = index.get("tags") or {}
    bad = [t for t in tags if not (isinstance(t, str) and TAG.fullmatch(t))]
    if bad:
        index["tags"] = {t: r for t, r in tags.items() if t not in bad}
        path.write_text(json.dumps(index))
    return [repr(t[:60]) for t in bad]


#: The key :func:`colour_by_direction` adds to a benchmark of ``index.json`` whose metric is
#: higher-is-better (value ``"higher"``); asv's page ignores keys it does not know.
BETTER_KEY = "fusebench_better"
#: asv 0.6.6's colouring of the benchmark list's "recent change" (``summarylist.js``): a rise red
#: (``positive-change``), a fall green, whatever the metric.
SUMMARYLIST_COLOURS = """\
                if (change > 5) {
                    change_td.addClass('positive-change');
                }
                else if (change < -5) {
                    change_td.addClass('negative-change');
                }
"""
SUMMARYLIST_BY_DIRECTION = """\
                // fusebench patch (fusebench/site/site_fixes.py): red is worse, green better, by the
                // metric's direction (a higher-is-better metric's rise is a gain)
                var fbWorse = $.asv.main_json.benchmarks[row.name].%s === 'higher' ? -change : change;
                if (fbWorse > 5) {
                    change_td.addClass('positive-change');
                }
                else if (fbWorse < -5) {
                    change_td.addClass('negative-change');
                }
""" % BETTER_KEY


def colour_by_direction(html_dir: Path) -> int:
    """Mark each benchmark of ``html/index.json`` whose metric is higher-is-better
    (``{BETTER_KEY: "higher"}``; a name no metric ends in is left unmarked, lower-is-better as asv
    reads it) and patch ``summarylist.js`` to colour a change by it (:data:`SUMMARYLIST_BY_DIRECTION`).
    Returns the benchmarks marked.

    Raises:
        ValueError: ``summarylist.js`` is neither asv 0.6.6's nor patched (its colouring is missing).
    """
    from fusebench import metrictable

    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    count = 0
    for name, bm in index.get("benchmarks", {}).items():
        try:
            higher = metrictable.metric(name).better == metrictable.HIGHER
        except KeyError:
            continue  # not a fusebench metric: asv's reading
        if higher:
            bm[BETTER_KEY] = "higher"
            count += 1
    path.write_text(json.dumps(index))
    js_path = html_dir / "summarylist.js"
    js = js_path.read_text()
    if SUMMARYLIST_BY_DIRECTION not in js:
        if js.count(SUMMARYLIST_COLOURS) != 1:
            raise ValueError(f"{js_path} is not asv 0.6.6's (its change colouring is missing)")
        js_path.write_text(js.replace(SUMMARYLIST_COLOURS, SUMMARYLIST_BY_DIRECTION, 1))
    return count


def apply(html_dir: Path, ops) -> None:
    """Every fix of this module on a published site; ``ops``: the site's
    :class:`~fusebench.registry.Op` objects (their headline shapes)."""
    patch_orderbars(html_dir)
    open_at_headline(html_dir, ops)
    titles_with_units(html_dir)
    escape_code(html_dir)
    colour_by_direction(html_dir)
    fix_graphs(html_dir, ops)  # absent backends, category axes, commit order, y headroom, colours
    regressions_note(html_dir)


#: The key :func:`mark_absent` adds to a benchmark of ``index.json``: ``{parameter: [indices of the
#: values it lacks]}`` (a backend its op does not have); asv's page ignores keys it does not know.
ABSENT_KEY = "fusebench_absent"


def mark_absent(html_dir: Path, ops) -> int:
    """Mark in ``html/index.json`` each benchmark's ``backend`` values that its op does not have
    (``Op.backends``; the suite's backend axis is the full list), under :data:`ABSENT_KEY`, for
    the graph page to leave out of its selectors, legend and axis (:data:`GRAPH_JS`). Returns the
    benchmarks marked."""
    import ast

    from fusebench.asv.asvsuite import benchmark_name

    path = html_dir / "index.json"
    index = json.loads(path.read_text())
    count = 0
    for op in ops:
        prefix = benchmark_name(op.name, "")
        for name, bm in index.get("benchmarks", {}).items():
            names = bm.get("param_names") or []
            if not name.startswith(prefix) or "backend" not in names:
                continue
            values = bm["params"][names.index("backend")]
            absent = [i for i, v in enumerate(values) if ast.literal_eval(v) not in op.backends]
            if absent:
                bm[ABSENT_KEY] = {"backend": absent}
                count += 1
    path.write_text(json.dumps(index))
    return count


_ABSENT_FN = """\
    // fusebench (fusebench/site/site_fixes.py): the indices of a benchmark's parameter values that it
    // lacks (index.json's %s: a backend its op does not have)
    function fbAbsent(name, param) {
        var bm = $.asv.main_json.benchmarks[name];
        return (bm && bm.%s && bm.%s[param]) || [];
    }

""" % (ABSENT_KEY, ABSENT_KEY, ABSENT_KEY)

#: ``(asv 0.6.6's graphdisplay.js text, what replaces it)``, each found exactly once:
#: a benchmark's absent values (:func:`mark_absent`) are never selected, and their buttons hidden;
#: against a category axis (x-axis shape, backend, dtype) the categories are the parameter's values
#: in order and the axis spans them (flot counted a point with no value by its label, and GELU's
#: shapes, numbers as text, stretched the axis to the largest shape: every bar in the leftmost pixels);
#: the commit picker is sorted by revision, not as text; the y range leaves headroom above the
#: top series and below the lowest (asv set it to the data's own range: a series on the frame).
GRAPH_JS = (
    ("    /* Check if x-axis is a category axis */\n",
     _ABSENT_FN + "    /* Check if x-axis is a category axis */\n"),
    ("                count = count * item.length;\n                benchmark_param_selection.push(item);\n",
     "                // fusebench: never a value the benchmark lacks\n"
     "                var fbSkip = fbAbsent(current_benchmark, param_name);\n"
     "                item = item.filter(function (j) { return fbSkip.indexOf(j) < 0; });\n"
     "                count = count * item.length;\n                benchmark_param_selection.push(item);\n"),
    ("                value_display = '' + $.asv.convert_benchmark_param_value(value);\n\n"
     "                button.text(value_display);\n",
     "                value_display = '' + $.asv.convert_benchmark_param_value(value);\n\n"
     "                button.text(value_display);\n"
     "                if (fbAbsent(current_benchmark, param_names[param_idx]).indexOf(value_idx) >= 0) {\n"
     "                    button.addClass('hidden');  // fusebench: a value the benchmark lacks\n"
     "                }\n"),
    ("            revisions.sort();\n",
     "            revisions.sort(function (a, b) { return a - b; });  // fusebench: by number\n"),
    ("                $.each(graphs, function(i, graph) {\n"
     "                    $.each(graph.data, function(j, point) {\n"
     "                        point[0] = $(\"<span>\").text('' + point[0]).html();\n"
     "                    });\n"
     "                });\n",
     "                // fusebench: the parameter's values in order, less those the benchmark lacks, as the\n"
     "                // categories; a point with no value left out; the axis spanning the categories\n"
     "                var fbBm = $.asv.main_json.benchmarks[current_benchmark];\n"
     "                var fbSkip = fbAbsent(current_benchmark, fbBm.param_names[x_coordinate_axis - 1]);\n"
     "                var fbCategories = [];\n"
     "                $.each(fbBm.params[x_coordinate_axis - 1], function(k, v) {\n"
     "                    if (fbSkip.indexOf(k) < 0) {\n"
     "                        var fbLabel = '' + $.asv.convert_benchmark_param_value(v);\n"
     "                        fbCategories.push($(\"<span>\").text(fbLabel).html());\n"
     "                    }\n"
     "                });\n"
     "                $.each(graphs, function(i, graph) {\n"
     "                    $.each(graph.data, function(j, point) {\n"
     "                        point[0] = $(\"<span>\").text('' + point[0]).html();\n"
     "                    });\n"
     "                    graph.data = graph.data.filter(function (point) {\n"
     "                        return point[1] !== null && fbCategories.indexOf(point[0]) >= 0;\n"
     "                    });\n"
     "                });\n"
     "                options.xaxis.categories = fbCategories;\n"
     "                options.xaxis.min = -0.5;\n"
     "                options.xaxis.max = fbCategories.length - 0.5;\n"),
    ("        options.yaxis.min = min;\n        options.yaxis.max = max;\n",
     "        // fusebench: headroom of 8 % of the range above and below (0 under bars of positive values)\n"
     "        var fbPad = (max - min) * 0.08 || Math.abs(max) * 0.08 || 1;\n"
     "        var fbFloor = min >= 0 && (x_coordinate_is_category || min - fbPad < 0);\n"
     "        options.yaxis.min = fbFloor ? 0 : min - fbPad;\n"
     "        options.yaxis.max = max + fbPad;\n"),
)

#: asv 0.6.6's seven series colours (``asv.js``); flot derives an eighth and later ones from them by
#: shading, so an eighth backend got a darker copy of the first's blue (eager and flaggems).
ASV_COLOURS = """\
    var colors = [
        '#247AAD',
        '#E24A33',
        '#988ED5',
        '#777777',
        '#FBC15E',
        '#8EBA42',
        '#FFB5B8'
    ];
"""
#: Ten colours of distinct hue (matplotlib's tab10): every backend of the axis its own.
COLOURS = """\
    // fusebench (fusebench/site/site_fixes.py): ten colours of distinct hue, one per backend
    var colors = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
                  '#bcbd22', '#17becf'];
"""
#: The graph page's selector buttons as wide as their labels: asv's justified group gave four
#: buttons a quarter of the column each and cut "backend" to "backenc"; a label wider than the
#: column (a commit and its date) wraps.
STYLE = """<style id="fusebench-style">
      #graphdisplay-navigation-params .btn-group-justified { display: flex; flex-wrap: wrap; }
      #graphdisplay-navigation-params .btn-group-justified > .btn {
        flex: 1 1 auto; width: auto; padding-left: 3px; padding-right: 3px; }
      #graphdisplay-navigation-params .btn-group-vertical > .btn { white-space: normal; }
    </style>"""
#: asv's regressions list, then the sentence :func:`regressions_note` puts above it.
REGRESSIONS_ANCHOR = '      <div id="regressions-body">\n'
REGRESSIONS_NOTE = """\
      <div id="fusebench-regressions-note" class="alert alert-info" style="margin: 10px 20px">
        asv lists every change beyond a fixed ratio of the stored medians (<code>asv.conf.json</code>'s
        <code>regressions_thresholds</code>); it knows neither the rounds, the noise history nor
        contamination, so most of these are within noise. The regression gate's verdict on each
        commit is on the <a href="verdicts/index.html">Verdicts</a> page.
      </div>
"""


def _replace_once(path: Path, pairs) -> bool:
    """Each ``(old, new)`` of ``pairs`` replaced in ``path``; True when patched now. False when the
    file is missing, was patched before, or is not asv 0.6.6's (every ``old`` must be there exactly
    once; nothing is changed otherwise)."""
    if not path.is_file():
        return False
    text = path.read_text()
    if all(new in text for _, new in pairs) or any(text.count(old) != 1 for old, _ in pairs):
        return False  # patched before (an insertion keeps its anchor), or another asv
    for old, new in pairs:
        text = text.replace(old, new, 1)
    path.write_text(text)
    return True


def fix_graphs(html_dir: Path, ops) -> bool:
    """The graph page's fixes: :func:`mark_absent`, :data:`GRAPH_JS` into ``graphdisplay.js``,
    :data:`COLOURS` into ``asv.js`` and :data:`STYLE` into ``index.html``. Returns True when
    ``graphdisplay.js`` was patched now."""
    mark_absent(html_dir, ops)
    patched = _replace_once(html_dir / "graphdisplay.js", GRAPH_JS)
    _replace_once(html_dir / "asv.js", ((ASV_COLOURS, COLOURS),))
    _replace_once(html_dir / "index.html", (("</head>", "    " + STYLE + "\n  </head>"),))
    return patched


def regressions_note(html_dir: Path) -> bool:
    """Put :data:`REGRESSIONS_NOTE` above asv's regressions list in ``index.html`` (its script
    fills the list and leaves the note). Returns True when added now."""
    note = REGRESSIONS_NOTE + REGRESSIONS_ANCHOR
    return _replace_once(html_dir / "index.html", ((REGRESSIONS_ANCHOR, note),))
