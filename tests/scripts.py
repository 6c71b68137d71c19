"""Scripted models: plain functions of the request, as a real model would see it."""

from __future__ import annotations

import json
import re

from tests.fakes.anthropic import ModelRequest, Reply, ToolResult, text, tool_use

UPLOADED = "/buddy/work/uploads/population_2000_2010_2020.csv"

# World Bank aggregate codes (regions, income groups, lending groups, World).
AGGREGATE_CODES = """
AFE AFW ARB CEB CSS EAP EAR EAS ECA ECS EMU EUU FCS HIC HPC IBD IBT IDA IDB IDX LAC LCN
LDC LIC LMC LMY LTE MEA MIC MNA NAC OED OSS PRE PSS PST SAS SSA SSF SST TEA TEC TLA TMN
TSA TSS UMC WLD
"""
AGGREGATES = sorted(AGGREGATE_CODES.split())

COMPUTE = f"""
import csv, json
AGGREGATES = set({AGGREGATES!r})
values = {{}}
with open({UPLOADED!r}, newline="") as f:
    for row in csv.DictReader(f):
        if row["Country Code"] in AGGREGATES or row["Year"] not in ("2000", "2020"):
            continue
        values.setdefault(row["Country Name"], {{}})[row["Year"]] = int(float(row["Value"]))
both = {{name: v for name, v in values.items() if len(v) == 2}}
growth = sorted(
    ((v["2020"] - v["2000"], name, v["2000"], v["2020"]) for name, v in both.items()), reverse=True
)[:3]
rows = [{{"country": n, "y2000": a, "y2020": b, "increase": d}} for d, n, a, b in growth]
print(json.dumps(rows))
"""


def stdout_of(result_text: str) -> str:
    """The stdout section of a run_code result, as the bot formats it."""
    match = re.search(r"--- stdout ---\n(.*?)(?:\n--- stderr|\Z)", result_text, re.S)
    return match.group(1).strip() if match else ""


def all_tool_results(req: ModelRequest) -> list[ToolResult]:
    """Every tool result in the conversation so far, oldest first."""
    return [
        ToolResult(block)
        for message in req.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def table(rows: list[dict]) -> str:
    lines = ["| Country | 2000 | 2020 | Increase |", "|---|---:|---:|---:|"]
    lines += [
        f"| {r['country']} | {r['y2000']:,} | {r['y2020']:,} | {r['increase']:,} |" for r in rows
    ]
    return "\n".join(lines)


def population_analyst(req: ModelRequest) -> Reply:
    """Lists the files, trips on a missing module, redoes the work with csv, writes the report,
    and answers from the numbers the sandbox printed."""
    results = req.tool_results()
    last = results[-1].text if results else ""
    match req.turn:
        case 0:
            return Reply([tool_use("list_files", {"path": "/buddy/work/uploads"})])
        case 1:
            assert "population_2000_2010_2020.csv" in last, last
            code = f"import polars as pl\nprint(pl.read_csv({UPLOADED!r}).shape)"
            call = tool_use("run_code", {"language": "python", "code": code})
            return Reply([text("Let me load it."), call])
        case 2:
            assert "ModuleNotFoundError" in last, last
            return Reply(
                [
                    text("polars is not installed; using the csv module instead."),
                    tool_use("run_code", {"language": "python", "code": COMPUTE}),
                ]
            )
        case 3:
            rows = json.loads(stdout_of(last))
            report = (
                "# Largest population growth, 2000 to 2020\n\n"
                "Aggregates (regions, income groups, World) were excluded by their World Bank "
                "codes before ranking countries by absolute increase.\n\n" + table(rows) + "\n"
            )
            code = (
                "import os\nos.makedirs('/buddy/work/out', exist_ok=True)\n"
                f"open('/buddy/work/report.md', 'w').write({report!r})\n"
                f"open('/buddy/work/out/top3.json', 'w').write({json.dumps(rows)!r})\n"
                "print('report written')"
            )
            return Reply([tool_use("run_code", {"language": "python", "code": code})])
        case _:
            computed = [r for r in all_tool_results(req) if stdout_of(r.text).startswith("[{")]
            rows = json.loads(stdout_of(computed[-1].text))
            answer = (
                "The three countries with the largest absolute growth from 2000 to 2020, "
                "after excluding aggregates:\n\n" + table(rows)
            )
            return Reply([text(answer)])


GROWTH_CHART = """
import json
import matplotlib.pyplot as plt
top = json.load(open('/buddy/work/out/top3.json'))
plt.bar([r['country'] for r in top], [r['increase'] for r in top])
plt.title('Population increase, 2000 to 2020')
plt.xlabel('Country')
plt.ylabel('People')
plt.savefig('/buddy/work/out/growth.png')
print('chart saved')
"""


def population_charted(req: ModelRequest) -> Reply:
    """The population analyst, who also draws the growth as a bar chart (plt.bar) in the
    step that writes the report."""
    reply = population_analyst(req)
    if req.turn == 3:
        call = reply.content[-1]
        code = call["input"]["code"] + "\n" + GROWTH_CHART
        reply.content[-1] = {**call, "input": {**call["input"], "code": code}}
    return reply
