"""The image cap of a 2.x agent when saving is the hard part (issue 29, items 2 and 3),
through a real `Agent` with a `ContextManager` attached (`agentscope_ctx/agentscope2/_images.py`):
the saved images are private, and an image that cannot be saved does not lift the cap."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.message import Base64Source, DataBlock, TextBlock, UserMsg
from agentscope.state import AgentState
from agentscope.workspace import LocalWorkspace
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.agentscope2._images import _images as _images_in
from agentscope_ctx.agentscope2._images import cap_images
from tests.support.fakes import FakeChatModel

BAD = "not base64 at all!"
"""Inline data that is no valid base64 (a provider could not read it either)."""


def _image(i: int, data: str | None = None) -> DataBlock:
    return DataBlock(
        name=f"img{i}",
        source=Base64Source(
            data=base64.b64encode(f"image {i}".encode()).decode() if data is None else data,
            media_type="image/png",
        ),
    )


def _agent(images: list[DataBlock], limit: int, **kwargs: object) -> tuple[Agent, FakeChatModel]:
    model = FakeChatModel()
    context = [
        UserMsg("user", [image, TextBlock(text=f"picture {i}")]) for i, image in enumerate(images)
    ]
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        state=AgentState(context=context),
        **kwargs,  # type: ignore[arg-type]
    )
    agent.context_config = agent.context_config.model_copy(update={"max_image_num": limit})
    return agent, model


def _sent_images(model: FakeChatModel) -> int:
    return sum(
        isinstance(block, DataBlock)
        for msg in model.calls[-1]["messages"]
        if not isinstance(msg.content, str)
        for block in msg.content
    )


def _notices(agent: Agent) -> list[str]:
    return [
        block.text
        for msg in agent.state.context
        if not isinstance(msg.content, str)
        for block in msg.content
        if isinstance(block, TextBlock) and block.text.startswith("<system-reminder>The image")
    ]


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)  # what most users have: 0755 folders, 0644 files
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
async def test_i29_02_saved_images_are_private(tmp_path: Path) -> None:
    agent, model = _agent([_image(i) for i in range(4)], 1)
    manager = ContextManager(ContextConfig(working_dir=str(tmp_path / "ctx")))
    manager.attach(agent)

    await agent.reply(UserMsg("user", "what do you see?"))

    assert _sent_images(model) == 1
    media = tmp_path / "ctx" / "media"
    (own,) = media.iterdir()  # the tenant's folder (docs/tenants.md)
    files = sorted(own.iterdir())
    assert len(files) == 3
    assert _mode(media) == 0o700 and _mode(own) == 0o700
    assert {_mode(f) for f in files} == {0o600}
    assert sorted(f.read_bytes() for f in files) == [f"image {i}".encode() for i in range(3)]
    await manager.close()


@pytest.mark.usefixtures("open_umask")
async def test_i29_02_an_older_world_readable_media_folder_is_tightened(tmp_path: Path) -> None:
    media = tmp_path / "ctx" / "media"
    media.mkdir(parents=True, mode=0o755)
    old = media / "old.png"
    old.write_bytes(b"an image saved by an older version")
    old.chmod(0o644)
    agent, _ = _agent([_image(i) for i in range(2)], 1)
    manager = ContextManager(ContextConfig(working_dir=str(tmp_path / "ctx")))
    manager.attach(agent)

    await agent.reply(UserMsg("user", "what do you see?"))

    assert _mode(media) == 0o700
    assert {_mode(f) for f in media.iterdir() if f.is_file()} == {0o600}
    assert {_mode(d) for d in media.iterdir() if d.is_dir()} == {0o700}
    await manager.close()


async def test_i29_03_an_image_the_offloader_cannot_save_does_not_lift_the_cap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The offloader (a real LocalWorkspace) raises on data that is not base64: the cap of 2
    # still holds for the 6 images; the others go to the workspace as before.
    images = [_image(i, BAD if i == 1 else None) for i in range(6)]
    workdir = tmp_path / "workspace"
    agent, model = _agent(images, 2, offloader=LocalWorkspace(workdir=str(workdir)))
    manager = ContextManager(ContextConfig(working_dir=str(tmp_path / "ctx")))
    manager.attach(agent)

    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        await agent.reply(UserMsg("user", "what do you see?"))

    assert _sent_images(model) == 2
    notices = _notices(agent)
    assert len(notices) == 4
    assert all("is offloaded into workspace:///" in notices[i] for i in (0, 2, 3))
    # the bad one: the offloader failed, so it went to the media folder, as it came
    assert "The image named 'img1' is not valid base64 data" in notices[1]
    saved = Path(notices[1].split("is saved into ")[1].split(", you can")[0])
    assert saved.read_text() == BAD
    assert saved.parent.parent == tmp_path / "ctx" / "media"  # in the tenant's folder
    assert "the offloader could not save an image" in caplog.text
    assert "is not valid base64" in caplog.text
    await manager.close()


async def test_i29_03_an_image_that_cannot_be_saved_anywhere_is_still_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # No offloader, and the media folder cannot be made (a file stands in its place): every
    # image over the cap is removed all the same, by a notice that says it was not saved.
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "media").write_text("not a folder")
    agent, model = _agent([_image(i) for i in range(6)], 2)
    manager = ContextManager(ContextConfig(working_dir=str(tmp_path / "ctx")))
    manager.attach(agent)

    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        reply = await agent.reply(UserMsg("user", "what do you see?"))

    assert reply.get_text_content() == "Done."
    assert _sent_images(model) == 2
    notices = _notices(agent)
    assert len(notices) == 4
    for i, notice in enumerate(notices):
        assert notice.startswith(
            f"<system-reminder>The image named 'img{i}' is removed to free up context space; "
            "it could not be saved ("
        ), notice
    assert caplog.text.count("could not be saved") == 4
    await manager.close()


@settings(max_examples=25, deadline=None)
@given(
    bad=st.lists(st.booleans(), max_size=8),
    limit=st.integers(0, 4),
    offloader=st.booleans(),
)
@example(bad=[False, True, False, False, False, False], limit=2, offloader=True)  # the issue's
def test_i29_03_the_cap_holds_whichever_images_cannot_be_saved(
    tmp_path_factory: pytest.TempPathFactory, bad: list[bool], limit: int, offloader: bool
) -> None:
    root = tmp_path_factory.mktemp("cap")
    images = [_image(i, BAD + str(i) if is_bad else None) for i, is_bad in enumerate(bad)]
    kwargs = {"offloader": LocalWorkspace(workdir=str(root / "ws"))} if offloader else {}
    agent, _ = _agent(images, limit, **kwargs)

    replaced = asyncio.run(cap_images(agent, root / "media", {}))

    excess = max(len(bad) - limit, 0)
    assert replaced == excess
    assert len(_images_in(agent.state.context)) == len(bad) - excess
    notices = _notices(agent)
    assert len(notices) == excess
    for i, notice in enumerate(notices):  # each saved where it can be, and reads back
        if bad[i]:
            path = Path(notice.split("is saved into ")[1].split(", you can")[0])
            assert path.read_text() == BAD + str(i)
        else:
            url = notice.split("is offloaded into ")[1].split(", you can")[0]
            path = root / "ws" / url.removeprefix("workspace:///") if offloader else Path(url)
            assert path.read_bytes() == f"image {i}".encode()
