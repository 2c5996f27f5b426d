"""Drive `rfs mcp` with the official Python MCP SDK (`pip install mcp`),
a client no one here wrote. Usage:

    mcp_client.py RFS_BIN session    -- a whole session; prints JSON facts
    mcp_client.py RFS_BIN disconnect -- start a long step, then go away

The repository is the current directory; the environment (state dir,
provider) is passed through. tests/mcp.rs runs both and checks the
facts and what the server left behind.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


async def session(rfs):
    params = StdioServerParameters(command=rfs, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    facts = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = await s.list_tools()
            facts["tools"] = sorted(t.name for t in tools.tools)
            r = await s.call_tool("sync", {})
            facts["sync"] = json.loads(text(r))
            r = await s.call_tool("step", {"name": "hello", "command": "cat reproducer-marker.txt; echo to-err >&2; echo $RELAYFLOWS_SANDBOX_ID"})
            facts["step"] = json.loads(text(r))
            r = await s.call_tool("step", {"name": "fails", "command": "exit 4"})
            facts["failing_step"] = json.loads(text(r))
            r = await s.call_tool("step", {"name": "escape", "command": "true", "cwd": "../.."})
            facts["refused"] = {"is_error": r.is_error, "text": text(r)}
            r = await s.call_tool("step", {"name": "secret", "command": "echo token=$API_TOKEN", "env": {"API_TOKEN": "hunter2-very-secret"}})
            facts["secret_step"] = text(r)
            r = await s.call_tool("attach", {"command": "sh", "cols": 60, "rows": 10})
            term = json.loads(text(r))
            await s.call_tool("send", {"terminal": term, "text": "echo from-the-terminal\r"})
            r = await s.call_tool("assert_screen", {"terminal": term, "text": "from-the-terminal", "timeout": 20})
            facts["assert"] = {"is_error": r.is_error, "text": text(r)}
            r = await s.call_tool("assert_screen", {"terminal": term, "text": "never-shown", "timeout": 1})
            facts["assert_fails"] = {"is_error": r.is_error, "text": text(r)}
            r = await s.call_tool("journal", {"tail": 5})
            facts["journal"] = text(r).splitlines()
            r = await s.call_tool("save", {"path": "saved-by-mcp.rhai", "overwrite": True})
            facts["save"] = text(r)
            r = await s.call_tool("end", {})
            facts["end"] = text(r)
            r = await s.call_tool("step", {"name": "after", "command": "true"})
            facts["after_end"] = {"is_error": r.is_error, "text": text(r)}
    print(json.dumps(facts))


async def disconnect(rfs):
    params = StdioServerParameters(command=rfs, args=["mcp"], env=dict(os.environ), cwd=os.getcwd())
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            call = asyncio.ensure_future(s.call_tool("step", {"name": "long", "command": "sleep 60"}))
            # Wait until the step runs (its start is journaled), then go.
            state = os.environ["RFS_STATE_DIR"]
            for _ in range(600):
                found = False
                for root, _, files in os.walk(os.path.join(state, "runs")):
                    if "journal.jsonl" in files:
                        with open(os.path.join(root, "journal.jsonl")) as f:
                            if '"kind":"step.start"' in f.read():
                                found = True
                if found:
                    break
                await asyncio.sleep(0.1)
            print(json.dumps({"step_started": found}), flush=True)
            call.cancel()
    # Leaving the context managers closes the server's stdin: a disconnect.


if __name__ == "__main__":
    rfs, what = sys.argv[1], sys.argv[2]
    asyncio.run(session(rfs) if what == "session" else disconnect(rfs))
