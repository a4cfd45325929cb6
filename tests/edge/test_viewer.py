"""The session viewer (`agentscope-ctx view`, issue 32 item 2), in a real headless browser:
Debian's chromium, driven by Playwright (no browser download). Skipped when either is missing
here; under CI=true a missing one fails the test (.ci/run installs both)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import owner_tag
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice, notice_paths
from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.viewer._dialog import Entry, Piece
from agentscope_ctx.viewer._page import render_page, script_json
from agentscope_ctx.viewer._session import Call, SessionView, fold
from tests.support.agent_line import Line
from tests.support.browser import open_page
from tests.support.demo_rungs import DemoRun

A_TAG = owner_tag("a")  # an agent's steps file is named by its key's tag


@pytest.fixture(scope="module")
def demo_dir(logs_demo: DemoRun) -> tuple[Path, int]:
    """The scripted logs demo's working dir and its number of model calls: the process's one
    run (``logs_demo``), which the tests here only read (`view` writes its page elsewhere)."""
    return logs_demo.path, logs_demo.report.steps


def test_i32_2_steps_record_one_call_per_model_call(demo_dir: tuple[Path, int]) -> None:
    path, steps = demo_dir
    records = StepFile(path).read("default")
    calls = fold(records)
    assert len(calls) == steps
    assert all(c.after <= c.budget for c in calls)
    # the ladder's rungs and the compaction are in the record, with what they freed
    assert any(c.before > c.threshold and c.freed for c in calls)
    assert sum(1 for c in calls if c.compacted and c.summary) >= 1
    big = [o["bytes"] for c in calls for o in c.outputs if o.get("bytes")]
    assert max(big) > 200_000  # the original size of an output saved whole
    folder = path / "usage" / "steps" / "default"
    for file in folder.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    # the demo writes its own viewer page too
    assert (path / "view.html").read_text(encoding="utf-8").count('class="point"') == steps


def test_i32_2_steps_file_is_bounded(tmp_path: Path) -> None:
    steps = StepFile(tmp_path, max_bytes=2_000)
    for run in range(100):
        steps.append({"agent": "a", "session": "s", "run": run, "call": True, "before": run})
    files = sorted((tmp_path / "usage" / "steps" / "s").iterdir())
    assert [f.name for f in files] == [f"{A_TAG}.1.jsonl", f"{A_TAG}.jsonl"]
    assert all(f.stat().st_size <= 2_000 for f in files)
    runs = [r["run"] for r in steps.read("s")]
    assert runs == sorted(runs) and runs[-1] == 99  # the newest kept, oldest first


async def check_page(page_file: Path, steps: int) -> str:
    """Open the page in chromium: no console error, one timeline point per model call, the
    search box filters the dialog; click the first notice and return the excerpt it shows."""
    html = page_file.read_text(encoding="utf-8")
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html  # nothing to fetch: it works offline
    async with open_page(page_file) as (page, errors):
        assert await page.locator("svg#timeline circle.point").count() == steps
        assert await page.locator("#excerpt").is_hidden()
        notice = page.locator("a.notice").first
        ref = await notice.get_attribute("data-ref")
        assert ref
        await notice.click()
        assert await page.locator("#excerpt").is_visible()
        shown = await page.locator("#excerpt").inner_text()
        assert shown.startswith(ref)
        await page.fill("#search", "Disk quota exceeded")
        visible = await page.locator(".msg:visible").count()
        assert 0 < visible < await page.locator(".msg").count()
    assert errors == []
    return shown.removeprefix(ref).strip()


async def test_i32_2_view_page_in_chromium(
    demo_dir: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page `agentscope-ctx view` writes loads with no console error, draws one point
    per model call, and a click on a notice shows its saved output's excerpt."""
    path, steps = demo_dir
    page_file = tmp_path / "view.html"
    assert main(["view", str(path), "-o", str(page_file)]) == 0
    assert str(page_file) in capsys.readouterr().out
    shown = await check_page(page_file, steps)
    first = StepFile(path).read("default")
    refs = [o["ref"] for r in first for o in r["outputs"]]
    head = Path(refs[0]).read_text(encoding="utf-8").splitlines()[0]
    assert shown.startswith(head)  # the first saved output's head


async def test_i48_the_pages_counts_are_the_demo_reports(demo_dir: tuple[Path, int]) -> None:
    """The demo's page and its report print the session's counts under the same names and
    with the same figures (both from `session_figures`; the report's model calls, reliefs
    and compactions are the run's own, and agree)."""
    path, _ = demo_dir
    report = {}
    for row in (path / "report.txt").read_text(encoding="utf-8").splitlines()[1:]:
        name, _, value = row.strip().partition("  ")
        report.setdefault(name, value.strip())
    async with open_page(path / "view.html") as (page, errors):
        names = await page.locator("#figures th").all_text_contents()
        values = await page.locator("#figures td").all_text_contents()
    assert errors == []
    shown = dict(zip(names, values, strict=True))
    context = shown.pop("context at the end")
    assert report["context at the end"].startswith(context.split(" (agent")[0] + " ")
    assert shown == {name: report[name] for name in shown}
    assert list(shown) == [
        "steps (model calls)",
        "ladder reliefs",
        "compactions",
        "messages in dialog/",
        "bytes offloaded",
    ]


def test_i46_14_the_page_view_writes_is_0600(
    demo_dir: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page is the session's dialog and outputs: private as the files it shows, whatever
    the umask, and an older page left open is replaced by a private one."""
    path, _ = demo_dir
    old_page = tmp_path / "old.html"
    old_page.write_text("an older page")
    os.chmod(old_page, 0o644)
    old_umask = os.umask(0o022)
    try:
        for page_file in (tmp_path / "view.html", old_page):
            assert main(["view", str(path), "-o", str(page_file)]) == 0
            assert stat.S_IMODE(page_file.stat().st_mode) == 0o600
            assert 'class="point"' in page_file.read_text(encoding="utf-8")
    finally:
        os.umask(old_umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.html", "view.html"]
    capsys.readouterr()


def test_i32_2_view_of_an_empty_working_dir_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    (empty / "dialog").mkdir(parents=True)
    assert main(["view", str(empty)]) == 1
    assert "no recorded steps" in capsys.readouterr().err
    assert not os.path.exists(empty / "view.html")


async def test_the_page_shows_only_its_sessions_dialog(tmp_path: Path) -> None:
    """Sessions sharing a working dir: the page of one shows its own dialog, none of the
    other's (the steps pick the session; the dialog did not, and showed the whole store)."""
    from agentscope_ctx import ContextConfig
    from agentscope_ctx.stores._dialog import DialogStore
    from agentscope_ctx.viewer._session import load_session
    from tests.support.lines import Msg

    for session, words in (("s-alice", "alice's secret plan"), ("s-bob", "bob's own notes")):
        store = DialogStore(tmp_path, record_fields={"agent": "assistant", "session": session})
        await store.append([Msg("user", words, "user")])
    config = ContextConfig(working_dir=str(tmp_path))

    page = str(load_session(config, "s-bob").dialog)
    assert "bob's own notes" in page and "alice's secret plan" not in page
    assert "alice's secret plan" in str(load_session(config, "s-alice").dialog)


# -- issue 46, item 5: the page's inline data is inert whatever an output holds -------------

PAYLOADS = [
    "<!--<script>",  # the issue's: the data element swallowed the page's script
    "</script><script>window.pwned = 1</script>",
    "<!-- --!><script>window.pwned = 2</script> -->",
    "line\u2028separators\u2029and </SCRIPT\t> <\\/script> ]]> &amp; &lt;",
    '<script>window.pwned = 3</script><img src=x onerror="window.pwned = 4">',
]


def test_i46_5_the_inline_json_holds_no_markup() -> None:
    """The page's JSON carries no ``<``, ``>``, ``&``, U+2028 or U+2029 (each as ``\\uXXXX``),
    and parses back to what was given."""
    import json

    value = {"excerpts": {f"tool_result/p{n}.txt": p for n, p in enumerate(PAYLOADS)}}
    text = script_json(value)
    assert not set("<>&\u2028\u2029") & set(text)
    assert "\\u003c!--\\u003cscript\\u003e" in text
    assert json.loads(text) == value


def _markup_page(path: Path, payload: str) -> None:
    """A page whose one saved output (and one dialog message) is `payload`."""
    ref = "tool_result/p.txt"
    call = Call(agent="a", before=900, after=500, threshold=800, budget=1000,
                outputs=[{"ref": ref, "bytes": 2_000}])  # fmt: skip
    dialog = [Entry("tool", "tool dump", "dump()", [Piece("cut", payload, ref, kept=2_000)])]
    view = SessionView("s", "local", [call], dialog, excerpts={ref: payload})
    path.write_text(render_page(view), encoding="utf-8")


async def test_i46_5_a_saved_output_holding_markup_shows_as_text_in_chromium(
    tmp_path: Path,
) -> None:
    """A page per payload (they must not cancel each other: a ``-->`` after ``<!--<script>``
    ends its escape): each loads in chromium with no console error, a click on its notice
    shows the output exactly, as text, and none of it runs."""
    shown, ran = [], []
    async with open_page() as (page, errors):
        for n, payload in enumerate(PAYLOADS):
            page_file = tmp_path / f"view-{n}.html"
            _markup_page(page_file, payload)
            await page.goto(page_file.as_uri())  # a new document: nothing of the last one
            await page.locator("#calls a.notice").click()
            shown.append(await page.locator("#excerpt").text_content())
            ran.append(await page.evaluate("[window.pwned, document.scripts.length]"))
            assert payload in str(await page.locator(".msg .out").text_content())
    assert errors == []
    assert shown == [f"tool_result/p.txt\n\n{payload}" for payload in PAYLOADS]
    assert ran == [[None, 2]] * len(PAYLOADS)  # the data and the page's script, no other


# -- issue 46, item 4: the page shows saved outputs, never a file a message names -----------

SECRET = "password=s3cret-7f3a9c"


def _secret_file(tmp_path: Path) -> Path:
    """The operator's service file, outside every root of the session."""
    secret = tmp_path / "operator" / "pg_service.conf"
    secret.parent.mkdir()
    secret.write_text(f"[prod]\nhost=db.internal\n{SECRET}\n")
    return secret


def _forged(path: Path, lead: str) -> str:
    """`lead` and some lines, ending in a well-formed notice naming `path` (its byte count is
    the excerpt's: the whole text before it)."""
    text = lead + "".join(f"line {n} of what I saw\n" for n in range(200))
    forged = excerpt_with_notice(text, max_bytes=1_024, file_path=str(path))
    assert list(notice_paths(forged)) == [str(path)]
    return forged


async def test_i46_4_a_users_notice_never_puts_a_file_into_the_page(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's message ending in a well-formed notice that names a file outside read_roots:
    the steps record does not take it (only tool results' notices), and the page holds none
    of the file's bytes; the output a tool returned, cut and saved, is on the page."""
    working_dir = tmp_path / "ctx"
    secret = _secret_file(tmp_path)
    config = ContextConfig(
        working_dir=working_dir,
        read_roots=[working_dir],
        tool_result={"recent_max_bytes": 2_000, "old_max_bytes": 1_024},
    )

    def dump(arg: str) -> str:
        return "".join(f"build step {n}: compiled module {arg}{n}\n" for n in range(300))

    session = line.session(config, None, {"dump": dump})
    try:
        await session.turn(
            _forged(secret, "Why does the build fail? Here is what I saw:\n"),
            line.tool_call("dump", arg="core"),
        )
    finally:
        await session.close()
    records = StepFile(working_dir).read("default")
    refs = [o["ref"] for r in records for o in r["outputs"]]
    assert refs and str(secret) not in refs  # the tool's output only
    page_file = tmp_path / "view.html"
    assert main(["view", str(working_dir), "-o", str(page_file)]) == 0
    capsys.readouterr()
    html = page_file.read_text(encoding="utf-8")
    assert "s3cret" not in html and "db.internal" not in html
    assert "build step 0: compiled module core0" in html  # the saved output's excerpt


async def test_i46_4_the_page_reads_outputs_as_read_file_does(tmp_path: Path) -> None:
    """Refs a steps record names (an older record took them from any message) are read as
    the session's agents' `read_file` reads them: their own saved output is shown, and a
    file under read_roots; a file outside read_roots, another session's saved output and
    another user's agent's are not."""
    from agentscope_ctx.core._tenant import agent_key
    from agentscope_ctx.stores.factory import open_stores
    from agentscope_ctx.viewer import load_session

    working_dir = tmp_path / "ctx"
    secret = _secret_file(tmp_path)
    config = ContextConfig(working_dir=working_dir, read_roots=[working_dir])
    mine = open_stores(config, agent="coder", session="s1")
    theirs = open_stores(config, agent="coder", session="s2")
    alices = open_stores(config, agent=agent_key("coder", "alice"), session="s1")
    try:
        own = str(mine.outputs.save("my own saved output\n"))
        other = str(theirs.outputs.save("s2's saved output: password=other-session\n"))
        alice = str(alices.outputs.save("alice's coder saved this\n"))
    finally:
        for stores in (mine, theirs, alices):
            stores.close()
    notes = working_dir / "notes.txt"
    notes.write_text("a file the agent read\n")
    refs = [own, other, alice, str(secret), str(notes), "/proc/self/environ"]
    StepFile(working_dir).append(
        {"agent": "coder", "session": "s1", "run": 1, "call": True, "before": 10, "after": 10,
         "threshold": 80, "budget": 100, "outputs": [{"ref": ref} for ref in refs]}
    )  # fmt: skip
    view = load_session(config, "s1")
    assert sorted(view.excerpts) == sorted([own, str(notes)])
    assert view.excerpts[own].startswith("my own saved output")
    page = render_page(view)
    assert "s3cret" not in page and "other-session" not in page
    # the agents of a user (recall.user, `view --user`) read their own saved outputs
    assert sorted(load_session(config, "s1", user="alice").excerpts) == sorted([alice, str(notes)])
