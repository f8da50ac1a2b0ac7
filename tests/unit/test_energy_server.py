"""The tool-agent tutorial's MCP server and ajet's MCP helpers (ajet.mcp_client), through a
real `fastmcp.Client`.

Every tool is called in memory with hand-computed expectations; the stdio and HTTP transports are
exercised with real subprocesses of `energy_server.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import fastmcp
import pytest

DIR = Path(__file__).resolve().parents[2] / "tutorial" / "example_tool_agent"
sys.path.insert(0, str(DIR))  # as when ajet loads the tutorial's server file: its folder is importable
from energy_server import mcp  # noqa: E402

from ajet import mcp_client as mcp_tools  # noqa: E402
from tests.unit.mcp_http import http_mcp_server


async def call(name: str, **arguments):
    async with fastmcp.Client(mcp) as client:
        return await client.call_tool(name, arguments, raise_on_error=False)


async def ok(name: str, **arguments) -> dict:
    result = await call(name, **arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def error_text(name: str, **arguments) -> str:
    result = await call(name, **arguments)
    assert result.is_error
    return result.content[0].text


async def test_lists_eight_tools_with_descriptions_and_required_args():
    async with fastmcp.Client(mcp) as client:
        tools = await client.list_tools()
    assert [t.name for t in tools] == [
        "get_gas_price", "compare_prices", "get_storage_level", "get_pipeline_flow",
        "get_weather_demand", "get_production", "convert_units", "convert_price",
    ]
    for tool in tools:
        assert tool.description
        assert tool.input_schema["required"] == list(tool.input_schema["properties"])


async def test_gas_price_is_looked_up_case_insensitively():
    assert await ok("get_gas_price", city="Boston") == {
        "city": "Boston", "hub": "Algonquin Citygate", "price_usd_per_mmbtu": 4.15}
    assert (await ok("get_gas_price", city="  new   york "))["city"] == "New York"


async def test_unknown_city_is_a_readable_tool_error():
    text = await error_text("get_gas_price", city="Paris")
    assert "unknown city 'Paris'" in text and "Boston" in text


async def test_compare_prices():
    assert await ok("compare_prices", city_a="Boston", city_b="Chicago") == {
        "city_a": "Boston", "price_a": 4.15, "city_b": "Chicago", "price_b": 2.7,
        "difference": 1.45, "cheaper": "Chicago", "cheaper_price": 2.7}
    reverse = await ok("compare_prices", city_a="Chicago", city_b="Boston")
    assert reverse["difference"] == -1.45 and reverse["cheaper"] == "Chicago"
    assert "unknown city" in await error_text("compare_prices", city_a="Boston", city_b="Atlantis")


async def test_storage_level():
    # 812 / 1012 = 0.80237 -> 80.2 %
    assert await ok("get_storage_level", region="east") == {
        "region": "East", "storage_bcf": 812, "capacity_bcf": 1012, "percent_full": 80.2}
    assert "South Central" in await error_text("get_storage_level", region="Gulf")


async def test_pipeline_flow():
    # 15200 / 17000 = 0.89412 -> 89.4 %
    result = await ok("get_pipeline_flow", pipeline="Transco")
    assert (result["flow_mmcf_per_day"], result["capacity_mmcf_per_day"], result["utilization_percent"]) == (15200, 17000, 89.4)
    assert "unknown pipeline" in await error_text("get_pipeline_flow", pipeline="Keystone")


@pytest.mark.parametrize("city, temperature, hdd, level", [
    ("Chicago", 22, 43, "high"), ("Atlanta", 45, 20, "moderate"), ("Los Angeles", 60, 5, "low")])
async def test_weather_demand(city, temperature, hdd, level):
    result = await ok("get_weather_demand", city=city)
    assert (result["temperature_f"], result["heating_degree_days"], result["demand_level"]) == (temperature, hdd, level)


async def test_production_and_its_errors():
    assert await ok("get_production", state="Texas", year=2023) == {"state": "Texas", "year": 2023, "production_bcf": 11010}
    assert (await ok("get_production", state="ohio", year="2019"))["production_bcf"] == 2410  # "2019" coerced
    assert "2019-2023" in await error_text("get_production", state="Texas", year=2018)
    assert "unknown state" in await error_text("get_production", state="Alaska", year=2020)


@pytest.mark.parametrize("value, from_unit, to_unit, expected", [
    (1, "MMBtu", "therm", 10.0),           # 1 therm = 100,000 Btu
    (1, "MMBtu", "kWh", 293.0711),         # 1.05505585262e9 J / 3.6e6 J
    (1, "MWh", "MMBtu", 3.4121),           # 3.6e9 J / 1.05505585262e9 J
    (1, "GJ", "MMBtu", 0.9478),            # 1e9 / 1.05505585262e9
    (1, "Mcf", "MMBtu", 1.037),            # EIA average heat content
    (1, "MWh", "GJ", 3.6),
    (100, "therm", "kWh", 2930.7107),
    (250, "therms", "mmbtu", 25.0),        # aliases and case
])
async def test_convert_units_hand_checked(value, from_unit, to_unit, expected):
    result = await ok("convert_units", value=value, from_unit=from_unit, to_unit=to_unit)
    assert result["result"] == expected


async def test_convert_units_rejects_unknown_units_and_bad_values():
    assert "unknown unit 'BTU'; known units: MMBtu, therm, kWh, MWh, GJ, Mcf" in await error_text("convert_units", value=1, from_unit="BTU", to_unit="kWh")
    assert "valid number" in await error_text("convert_units", value="lots", from_unit="MMBtu", to_unit="kWh")
    assert "Missing required argument" in await error_text("convert_units", value=1, from_unit="MMBtu")
    assert "unknown unit 'litre'" in await error_text("convert_price", price=3, from_unit="MMBtu", to_unit="litre")


@pytest.mark.parametrize("to_unit, expected", [("therm", 0.34), ("GJ", 3.2226), ("Mcf", 3.5258), ("MWh", 11.6013)])
async def test_convert_price_scales_inversely_to_the_unit(to_unit, expected):
    # 3.40 USD/MMBtu: /10 per therm, /1.05506 per GJ, *1.037 per Mcf, *3.412142 per MWh = 11.60128
    result = await ok("convert_price", price=3.4, from_unit="MMBtu", to_unit=to_unit)
    assert result["converted_price"] == expected and result["label"] == f"USD/{to_unit}"


async def test_openai_specs_are_compact_and_complete():
    async with fastmcp.Client(mcp) as client:
        specs = await mcp_tools.list_openai_tools(client)
    assert len(specs) == 8
    production = next(s for s in specs if s["function"]["name"] == "get_production")
    assert production == {"type": "function", "function": {
        "name": "get_production",
        "description": "Natural gas production of a US state in a year, in Bcf.",
        "parameters": {"type": "object", "properties": {
            "state": {"description": "e.g. Texas", "type": "string"},
            "year": {"description": "2019 to 2023", "type": "integer"}},
            "required": ["state", "year"]}}}  # no 'title' / 'additionalProperties' noise


@pytest.mark.parametrize("name, arguments, expected_error", [
    ("get_gas_price", '{"city": "Boston"', "arguments are not valid JSON"),
    ("get_gas_price", '["Boston"]', "arguments must be a JSON object, got list"),
    ("get_oil_price", '{"city": "Boston"}', "Unknown tool: 'get_oil_price'"),
    ("get_gas_price", '{"town": "Boston"}', "Missing required argument"),
    ("get_gas_price", '{"city": "Paris"}', "unknown city 'Paris'"),
])
async def test_call_tool_turns_every_failure_into_an_error_outcome(name, arguments, expected_error):
    async with fastmcp.Client(mcp) as client:
        outcome = await mcp_tools.call_tool(client, name, arguments)
    assert expected_error in outcome.error
    assert outcome.content.startswith("Error: ") and "For further information" not in outcome.content
    assert "result" not in outcome.record() and outcome.record()["error"] == outcome.error


async def test_call_tool_success_keeps_the_servers_json_text():
    async with fastmcp.Client(mcp) as client:
        outcome = await mcp_tools.call_tool(client, "get_production", '{"state": "Ohio", "year": 2021}')
    assert outcome.error is None
    assert json.loads(outcome.content) == outcome.result == {"state": "Ohio", "year": 2021, "production_bcf": 2290}
    assert outcome.record() == {"name": "get_production", "arguments": {"state": "Ohio", "year": 2021}, "result": outcome.result}


async def test_stdio_server_subprocess():
    async with mcp_tools.open_client("python energy_server.py", DIR) as client:
        outcome = await mcp_tools.call_tool(client, "get_gas_price", {"city": "Denver"})
    assert outcome.result["price_usd_per_mmbtu"] == 2.55



async def test_http_server_subprocess():
    with http_mcp_server("energy_server.py", DIR) as url:
        async with mcp_tools.open_client(url) as client:
            outcome = await mcp_tools.call_tool(client, "get_storage_level", {"region": "Pacific"})
    assert outcome.result["percent_full"] == 77.1  # 262 / 340
