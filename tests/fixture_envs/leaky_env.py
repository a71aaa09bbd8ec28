"""An environment whose tools leak their secret every way code can: printed, logged to a
logger nobody configured, warned, raised in a task nobody awaits or a thread nobody
joins, and returned inside a result that is not a valid ToolOutput."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import warnings

from orsbox import TextBlock, ToolOutput, tool
from orsbox.authoring import SingleTask


class Leaky(SingleTask):
    prompt = "leaky"

    @property
    def secret(self) -> str:
        return self.secrets["token"]

    @tool
    def bad_result(self) -> ToolOutput:
        """Return a dict that is not a ToolOutput, the secret inside."""
        return {"blocks": [{"type": "text", "text": self.secret, "bogus": self.secret}]}  # type: ignore[return-value]

    @tool
    async def chatter(self) -> ToolOutput:
        """Leak the secret through stdout, stderr, logging, warnings, a task, a thread."""
        print(f"stdout {self.secret}")
        print(f"stderr {self.secret}", file=sys.stderr)
        logging.getLogger("leaky.nobody.configured").error("logged %s", self.secret)
        warnings.warn(f"warned {self.secret}", stacklevel=1)

        async def fail() -> None:
            raise ValueError(f"task {self.secret}")

        task = asyncio.get_running_loop().create_task(fail())
        await asyncio.wait([task])  # it has failed; its exception stays unretrieved
        del task
        gc.collect()  # "Task exception was never retrieved" is logged when it is collected

        def thread_fails() -> None:
            raise ValueError(f"thread {self.secret}")

        thread = threading.Thread(target=thread_fails)
        thread.start()
        thread.join()
        return ToolOutput(blocks=[TextBlock(text="chattered")])
