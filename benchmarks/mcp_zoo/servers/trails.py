"""Trail conditions MCP server for the Cascade foothills (a zoo server written here).

Every result is plain text (Markdown), never JSON, as many public servers answer. `search_trails`
accepts any region and answers "No trails found" for one it does not know (an empty result, not
an error); trail ids (tr-1xx) appear only in its text. `hiking_tip` returns a random tip, so two
identical calls differ. Reports are invented and fixed (the latest is 2025-06-14); no clock.

    python trails.py        # serve over stdio
"""

from __future__ import annotations

import random
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

mcp = FastMCP("trails", instructions="Trail search, trail condition reports and trailhead parking for hikes in the "
              "Cascade foothills east of Seattle.")

# id: (name, region, length_km, gain_m, dogs allowed, status, last report date, reporter, conditions,
#      parking: (lot, spaces, pass required))
TRAILS = {
    "tr-104": ("Poo Poo Point", "Issaquah Alps", 11.6, 570, True, "open", "2025-06-12", "Erin W.",
               "Dry and dusty near the top; paragliders launching at the viewpoint.", ("Chirico Trailhead", 60, "none")),
    "tr-107": ("Tradition Lake Loop", "Issaquah Alps", 3.2, 45, True, "open", "2025-06-10", "Marco P.",
               "Flat and easy; some mud by the boardwalk.", ("High Point Trailhead", 40, "Discover Pass")),
    "tr-112": ("Squak Mountain Summit", "Issaquah Alps", 12.9, 610, True, "open", "2025-06-08", "Jun K.",
               "A tree is down across the East Side Trail at the 3 km mark; easy to step over.", ("Squak Mountain State Park lot", 25, "Discover Pass")),
    "tr-121": ("Rattlesnake Ledge", "Snoqualmie Valley", 8.0, 350, True, "open", "2025-06-14", "Priscilla N.",
               "Very busy on weekends; the upper ledges have no railing.", ("Rattlesnake Lake lot", 150, "none")),
    "tr-125": ("Mount Si", "Snoqualmie Valley", 12.9, 960, True, "open", "2025-06-13", "Dev R.",
               "Snow-free to the Haystack; the scramble is wet and slippery.", ("Mount Si Trailhead", 200, "Discover Pass")),
    "tr-128": ("Twin Falls", "Snoqualmie Valley", 5.8, 150, True, "open", "2025-06-11", "Aiko T.",
               "Falls running high; the lower viewpoint stairs are closed for repair.", ("Twin Falls Trailhead", 70, "Discover Pass")),
    "tr-133": ("Mailbox Peak", "Snoqualmie Valley", 15.3, 1220, True, "open", "2025-06-09", "Sam O.",
               "Patchy snow above 1,200 m; microspikes helpful early in the day.", ("Mailbox Peak Trailhead", 90, "Discover Pass")),
    "tr-140": ("Snow Lake", "Snoqualmie Pass", 11.3, 550, False, "open", "2025-06-14", "Lina F.",
               "Snow on the last kilometer above the lake; the lake is still partly frozen.", ("Alpental lot", 120, "Northwest Forest Pass")),
    "tr-142": ("Kendall Katwalk", "Snoqualmie Pass", 19.3, 800, True, "closed", "2025-06-07", "Ranger station",
               "Closed: avalanche debris across the Katwalk ledge. Expected to reopen in early July.", ("Pacific Crest Trail lot", 80, "Northwest Forest Pass")),
    "tr-146": ("Annette Lake", "Snoqualmie Pass", 12.1, 520, True, "open", "2025-06-12", "Tomasz B.",
               "Muddy switchbacks; bridge over Humpback Creek is fine.", ("Annette Lake Trailhead", 35, "Northwest Forest Pass")),
    "tr-151": ("Lake Serene", "Highway 2", 13.0, 820, True, "open", "2025-06-13", "Gabe L.",
               "Bridal Veil Falls spur is slick; the lake trail is clear.", ("Heybrook Ridge lot", 100, "Northwest Forest Pass")),
    "tr-155": ("Heybrook Lookout", "Highway 2", 2.1, 260, True, "open", "2025-06-05", "Ruth A.",
               "Clear; the lookout tower stairs are open.", ("Heybrook Lookout pullout", 15, "none")),
}
TIPS = [
    "Pack the ten essentials, even for a short hike.",
    "Start early on summer weekends: popular trailhead lots fill by 8 am.",
    "Check the avalanche forecast before hiking near Snoqualmie Pass in spring.",
    "Carry more water than you think on south-facing trails.",
    "Leave your trip plan with someone at home.",
    "Microspikes weigh little and help on late-spring snow.",
]


def _line(trail_id: str) -> str:
    name, _, km, gain, dogs, status, *_ = TRAILS[trail_id]
    return f"- **{name}** [{trail_id}]: {km} km round trip, {gain} m gain, {'dogs on leash' if dogs else 'no dogs'}, {status}"


@mcp.tool
def search_trails(
    region: Annotated[str, Field(description="Area to search, e.g. 'Issaquah Alps', 'Snoqualmie Valley', "
                                 "'Snoqualmie Pass' or 'Highway 2'.")],
    max_length_km: Annotated[float | None, Field(description="Only trails at most this long (round trip).")] = None,
    dog_friendly: Annotated[bool | None, Field(description="true: only trails that allow dogs.")] = None,
) -> str:
    """Find hiking trails in a region. Lists each trail's name, id, round-trip length, elevation gain, whether
    dogs are allowed and whether it is open."""
    wanted = region.strip().casefold()
    found = [tid for tid, t in TRAILS.items()
             if t[1].casefold() == wanted and (max_length_km is None or t[2] <= max_length_km)
             and (not dog_friendly or t[4])]
    if not found:
        return f"No trails found in {region!r} with those filters."
    return f"Found {len(found)} trail(s) in {TRAILS[found[0]][1]}:\n" + "\n".join(_line(t) for t in found)


@mcp.tool
def trail_report(trail_id: Annotated[str, Field(description="Trail id from search_trails, like tr-104.")]) -> str:
    """The latest condition report for a trail: status, date, who reported, and conditions."""
    trail = TRAILS.get(trail_id.strip().lower())
    if trail is None:
        return f"Error: unknown trail id {trail_id!r}. Search for trails first to get an id."
    name, region, km, gain, dogs, status, when, who, conditions, _ = trail
    return (f"## {name} ({region})\n\nStatus: {status.upper()}\nLast report: {when} by {who}\n"
            f"Length: {km} km round trip, {gain} m elevation gain\n\nConditions: {conditions}")


@mcp.tool
def parking_info(trail_id: Annotated[str, Field(description="Trail id, like tr-104.")]) -> str:
    """Trailhead parking for a trail: the lot, how many spaces, and which parking pass is required."""
    trail = TRAILS.get(trail_id.strip().lower())
    if trail is None:
        return f"Error: unknown trail id {trail_id!r}."
    lot, spaces, permit = trail[9]
    needed = "No pass is required." if permit == "none" else f"A {permit} is required."
    return f"{trail[0]} parks at {lot} ({spaces} spaces). {needed}"


@mcp.tool
def hiking_tip() -> str:
    """A random hiking safety tip."""
    return f"Tip: {random.choice(TIPS)}"


if __name__ == "__main__":
    mcp.run(show_banner=False)
