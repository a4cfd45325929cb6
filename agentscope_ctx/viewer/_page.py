"""`render_page`: a `SessionView` as one self-contained HTML page (inline CSS, SVG and
script: no CDN, works offline).

The timeline draws, per model call, the prompt before relief (orange) and as sent (blue),
the part of it the provider read from its prompt cache (green, where it reported that), with
the compaction trigger and the budget; a mark at each call where a rung ran, labelled with
what it freed. Below, a row per call: the provider's cache reads and writes, its rungs, a
compaction's summary (unfolds), and the saved outputs that entered the context; clicking a
notice shows its output's excerpt. Then what each agent's context held after its last
reply, part by part (a bar of the budget and a table, as Claude Code's ``/context``); last,
the dialog that left the context, with a search box. Above all, the session's counts as the
demo's report names them (`session_figures`). The context's part is drawn by `_page_context`,
the dialog's by `_page_dialog`.
"""

from __future__ import annotations

import json
from html import escape

from ._figures import session_figures
from ._page_context import context_html
from ._page_dialog import dialog_html, ref_text
from ._session import Call, SessionView

__all__ = ["render_page", "script_json", "size_text"]

_W, _H, _L, _R, _T, _B = 900, 320, 70, 20, 20, 40
_BEFORE, _AFTER, _READ = "#e67e22", "#2471a3", "#16a085"

_CSS = """
body{font:14px/1.4 sans-serif;margin:0 auto;max-width:960px;padding:12px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:24px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:4px;
vertical-align:top;text-align:left}td.n{text-align:right;white-space:nowrap}
a.notice{color:#8e44ad;cursor:pointer;text-decoration:underline;display:block}
#excerpt{position:sticky;bottom:0;background:#fdfdf5;border:1px solid #bbb;max-height:40vh;
overflow:auto;white-space:pre-wrap;padding:8px;margin:0}
#excerpt[hidden]{display:none}
.msg{border-left:3px solid #ccc;margin:6px 0;padding:2px 8px;white-space:pre-wrap}
.msg.assistant{border-color:#2471a3}.msg.tool{border-color:#27ae60}.msg.hint{border-color:#aaa}
.msg .who{display:block}.msg code.call{color:#555;white-space:pre-wrap}
.msg .out{background:#f7f9f9;padding:2px 4px;font-family:monospace;font-size:12px}
.msg .out.head{color:#777}
.msg .hint{color:#666;background:#f4f4f4;border:1px dashed #bbb;padding:2px 6px;margin:2px 0;
font-size:12px}.msg .hint b{color:#555}
a.notice.cut{font-size:12px}a.notice .tool{color:#222}
table#figures{width:auto}table#figures th{font-weight:normal;color:#555;padding-right:16px}
.rung{color:#27ae60}.compaction{color:#8e44ad}
.bar{display:flex;position:relative;height:22px;border:1px solid #999;margin:6px 0}
.bar span{display:block;height:100%}.bar .free{background:#f4f6f7}
.bar .reserve{background:repeating-linear-gradient(45deg,#fff,#fff 4px,#fbeee6 4px,#fbeee6 8px)}
.bar .trigger{position:absolute;top:-3px;bottom:-3px;width:2px;background:#e67e22}
i.key{display:inline-block;width:10px;height:10px;margin-right:6px}
"""

_SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('data').textContent);
  var box = document.getElementById('excerpt');
  function show(ref){
    var text = data.excerpts[ref];
    box.hidden = false;
    box.textContent = ref + '\\n\\n' + (text === undefined ? '(not readable now)' : text);
  }
  document.querySelectorAll('a.notice').forEach(function(a){
    a.addEventListener('click', function(e){ e.preventDefault(); show(a.dataset.ref); });
  });
  var search = document.getElementById('search');
  var count = document.getElementById('hits');
  search.addEventListener('input', function(){
    var q = search.value.toLowerCase();
    var n = 0;
    document.querySelectorAll('.msg').forEach(function(m){
      var hit = !q || m.textContent.toLowerCase().indexOf(q) >= 0;
      m.hidden = !hit;
      if (hit) { n += 1; }
    });
    count.textContent = n + ' message(s)';
  });
})();
"""


def size_text(n: int) -> str:
    """``273 KB``, ``1.2 MB``, ``512 bytes`` (the demo's chart key says sizes so too)."""
    if n < 1024:
        return f"{n:,} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:,.0f} KB"
    return f"{n / 1024 / 1024:,.1f} MB"


def _round_step(raw: float) -> int:
    """The least of 1, 2, 5, 10, 20, 50, ... that is at least `raw`."""
    power = 1
    while True:
        for m in (1, 2, 5):
            if m * power >= raw:
                return m * power
        power *= 10


def _freed(call: Call) -> str:
    parts = [f"{rung} -{tokens:,}" for rung, tokens in call.freed.items() if tokens]
    if call.compacted:
        parts.append(f"compaction: {call.compacted} messages")
    return ", ".join(parts)


def _timeline(calls: list[Call]) -> str:
    n = len(calls)
    top = max([1, *(max(c.before, c.after, c.budget, c.cache_read or 0) for c in calls)]) * 1.08
    pw, ph = _W - _L - _R, _H - _T - _B

    def x(i: int) -> float:
        return _L + (pw * i / (n - 1) if n > 1 else pw / 2)

    def y(v: float) -> float:
        return _T + ph - ph * v / top

    out = [
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-size="11">',
        f'<line x1="{_L}" y1="{_T + ph}" x2="{_L + pw}" y2="{_T + ph}" stroke="#333"/>',
        f'<line x1="{_L}" y1="{_T}" x2="{_L}" y2="{_T + ph}" stroke="#333"/>',
        f'<text x="{_L + pw / 2}" y="{_H - 6}" text-anchor="middle">model call</text>',
    ]
    step = _round_step(top / 5)
    for v in range(0, int(top) + 1, step):
        out.append(f'<text x="{_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,}</text>')
    for i in range(0, n, _round_step(n / 15)):
        out.append(f'<text x="{x(i):.1f}" y="{_T + ph + 14}" text-anchor="middle">{i + 1}</text>')
    for key, colour, name in (("budget", "#c0392b", "budget"), ("threshold", "#e67e22", "trigger")):
        pts = " ".join(f"{x(i):.1f},{y(getattr(c, key)):.1f}" for i, c in enumerate(calls))
        out.append(
            f'<polyline class="{key}" points="{pts}" fill="none" stroke="{colour}" '
            'stroke-dasharray="6,4"/>'
        )
        if calls:
            last = getattr(calls[-1], key)
            out.append(
                f'<text x="{_L + pw - 2}" y="{y(last) - 4:.1f}" text-anchor="end" '
                f'fill="{colour}">{name} {last:,}</text>'
            )
    for i, call in enumerate(calls):
        label = _freed(call)
        if label:
            colour = "#8e44ad" if call.compacted else "#27ae60"
            out.append(
                f'<line class="rung" x1="{x(i):.1f}" y1="{y(call.before):.1f}" x2="{x(i):.1f}" '
                f'y2="{y(call.after):.1f}" stroke="{colour}" stroke-width="3">'
                f"<title>call {i + 1}: {escape(label)}</title></line>"
            )
    for key, colour in (("before", _BEFORE), ("after", _AFTER)):
        pts = " ".join(f"{x(i):.1f},{y(getattr(c, key)):.1f}" for i, c in enumerate(calls))
        dash = ' stroke-dasharray="3,3"' if key == "before" else ""
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>'
        )
    read = [(i, c.cache_read) for i, c in enumerate(calls) if c.cache_read is not None]
    if read:
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in read)
        out.append(
            f'<polyline class="cache_read" points="{pts}" fill="none" stroke="{_READ}" '
            'stroke-width="1.5"><title>read from the provider\'s prompt cache</title></polyline>'
        )
    for i, call in enumerate(calls):
        tip = f"call {i + 1}: {call.before:,} before relief, {call.after:,} sent"
        if call.cache_read is not None:
            tip += f", {call.cache_read:,} read from the provider's cache"
        extra = _freed(call)
        tip += f"; {extra}" if extra else ""
        out.append(
            f'<circle class="point" data-call="{i + 1}" cx="{x(i):.1f}" cy="{y(call.after):.1f}" '
            f'r="3.5" fill="{_AFTER}"><title>{escape(tip)}</title></circle>'
        )
    out.append(
        f'<text x="{_L + 4}" y="{_T + 10}" fill="{_BEFORE}">before relief</text>'
        f'<text x="{_L + 90}" y="{_T + 10}" fill="{_AFTER}">as sent</text>'
        f'<text x="{_L + 150}" y="{_T + 10}" fill="{_READ}">cache read</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def _notice(ref: str, view: SessionView) -> str:
    """A saved output of the calls' table: the call that made it, its name and size."""
    known = view.sizes.get(ref)
    size = "" if known is None else f" ({size_text(known)})"
    tool = view.tools.get(ref, "")
    what = f'<span class="tool">{escape(tool)}</span>: ' if tool else ""
    return (
        f'<a class="notice" href="#excerpt" data-ref="{escape(ref)}" title="{escape(ref)}">'
        f"{what}{escape(ref_text(ref, view.root))}{size}</a>"
    )


def _cache(call: Call) -> str:
    """The provider's cache figures of a call: ``5,120`` read, ``+640`` written (``–``: not
    reported)."""
    if call.cache_read is None and call.cache_creation is None:
        return "–"
    read = "–" if call.cache_read is None else f"{call.cache_read:,}"
    written = "" if call.cache_creation is None else f" (+{call.cache_creation:,} written)"
    return read + written


def _rows(view: SessionView) -> str:
    rows = []
    for i, call in enumerate(view.calls, start=1):
        freed = escape(", ".join(f"{k} -{v:,}" for k, v in call.freed.items() if v))
        summary = ""
        if call.compacted:
            source = escape(call.summary_source or "")
            summary = (
                f'<details class="compaction"><summary>compaction: {call.compacted} '
                f"messages, summary by {source}</summary><pre>"
                f"{escape(call.summary or '')}</pre></details>"
            )
        outputs = "".join(_notice(str(o.get("ref")), view) for o in call.outputs)
        rows.append(
            f'<tr class="call"><td class="n">{i}</td><td class="n">{call.before:,}</td>'
            f'<td class="n">{call.after:,}</td><td class="n cache">{_cache(call)}</td>'
            f'<td><span class="rung">{freed}</span>{summary}'
            f"</td><td>{outputs}</td></tr>"
        )
    return "\n".join(rows)


def _figures(view: SessionView) -> str:
    """The session's counts, named and computed as the demo's report has them."""
    rows = "".join(
        f'<tr><th scope="row">{escape(name)}</th><td>{escape(value)}</td></tr>'
        for name, value in session_figures(view).rows()
    )
    return f'<table id="figures">{rows}</table>'


_INERT = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)
"""What `script_json` writes as escapes: JSON's own syntax has none of these characters, so
each is inside a string, where ``\\uXXXX`` is the same character."""


def script_json(value: object) -> str:
    """`value` as JSON to inline in a ``<script type="application/json">`` element: no ``<``
    (HTML's parser reads ``</script`` as the end of the element, and ``<!--<script>`` as an
    escape that swallows the page's next script), no ``>`` or ``&``, and no U+2028 / U+2029
    (line ends to older JavaScript), whatever the strings hold."""
    return json.dumps(value, ensure_ascii=False).translate(_INERT)


def render_page(view: SessionView) -> str:
    """The page (see the module docstring)."""
    data = script_json({"excerpts": view.excerpts})
    peak = max((c.before for c in view.calls), default=0)
    title = f"agentscope-ctx session {view.session}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p>store: {escape(view.store)}; largest prompt before relief {peak:,} tokens (the context
manager's estimate)</p>
{_figures(view)}
{_timeline(view.calls)}
<h2>Model calls</h2>
<table id="calls"><thead><tr><th>call</th><th>before relief</th><th>sent</th>
<th title="prompt tokens the provider read from its cache (and wrote to it)">cache read</th>
<th>rungs and compactions</th><th>saved outputs (click: excerpt)</th></tr></thead>
<tbody>
{_rows(view)}
</tbody></table>
<h2>What is in the context at the end</h2>
<div id="contexts">
{context_html(view)}
</div>
<h2>Dialog that left the context</h2>
<p><input id="search" type="search" placeholder="search the dialog" size="40">
<span id="hits">{len(view.dialog)} message(s)</span></p>
<div id="dialog">
{dialog_html(view)}
</div>
<pre id="excerpt" hidden></pre>
<script type="application/json" id="data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""
