"""The fixtures the published servers of the zoo work on, built the same way on every machine.

    garden-planner/   a Git repository (mcp-server-git): 12 commits on main by four people, two
                      branches, three tags, a staged new file and an unstaged change. Names, emails,
                      dates and contents are fixed, so the commit ids are too.
    birds/birds.db    a bird survey in SQLite (mcp-sqlite), with birds/metadata.yaml: the
                      Datasette-style metadata whose canned queries become the server's tools.

`build(root)` writes each into a temporary folder beside its place and renames it in, so a
server never sees half a fixture; the git server's write tools (commit, checkout, ...) change the
repository, which is why the benchmark builds it anew before every stage.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

PEOPLE = {
    "priya": ("Priya Raman", "priya@gardenplanner.dev"),
    "tomas": ("Tomás Ortega", "tomas@gardenplanner.dev"),
    "hannah": ("Hannah Becker", "hannah@gardenplanner.dev"),
    "seun": ("Oluwaseun Adeyemi", "seun@gardenplanner.dev"),
}

PLANTS = """name,family,sow_indoors_weeks,spacing_cm
tomato,Solanaceae,6,60
pepper,Solanaceae,8,45
lettuce,Asteraceae,4,25
carrot,Apiaceae,0,5
bean,Fabaceae,0,10
squash,Cucurbitaceae,3,90
"""

FROST_V1 = '''"""Average last spring frost dates by USDA hardiness zone."""

LAST_FROST = {
    "zone 4": "May 20",
    "zone 5": "May 10",
    "zone 6": "April 25",
    "zone 7": "April 30",
    "zone 8": "April 1",
}


def last_frost(zone: str) -> str:
    return LAST_FROST[zone.lower()]
'''

COMPANIONS = '''"""Which plants grow well together, and which do not."""

GOOD = {
    "tomato": ["basil", "carrot", "marigold"],
    "bean": ["carrot", "squash"],
    "lettuce": ["carrot", "radish"],
}

BAD = {
    "tomato": ["fennel", "potatoe"],
    "bean": ["onion"],
}
'''

WATERING = '''"""How often to water, in days between waterings, by plant and month."""

EVERY_DAYS = {
    "tomato": {"June": 3, "July": 3, "August": 3},
    "lettuce": {"June": 2, "July": 1, "August": 1},
}
'''

HARVEST = '''"""Days from transplant or sowing to first harvest."""

DAYS_TO_HARVEST = {
    "tomato": 75,
    "pepper": 80,
    "lettuce": 45,
    "carrot": 70,
    "bean": 55,
    "squash": 50,
    "basil": 30,
}
'''

CLI = '''"""Command line: garden-planner frost <zone>."""

import sys

from planner.frost import last_frost


def main() -> None:
    print(last_frost(" ".join(sys.argv[2:])))
'''

README_V1 = "# garden-planner\n\nPlan a vegetable garden: frost dates, spacing and companions.\n"
README_V2 = README_V1 + "\n## Zones\n\nZones follow the USDA hardiness map (zones 4 to 8 are supported).\n"

# (branch, who, ISO date, message, {path: content or None to delete}, tag)
HISTORY: list[tuple[str, str, str, str, dict[str, str], str | None]] = [
    ("main", "priya", "2024-02-05T09:12:00+00:00", "Initial commit: README and plant list",
     {"README.md": README_V1, "data/plants.csv": PLANTS}, None),
    ("main", "tomas", "2024-02-07T14:30:00+00:00", "Add frost date lookup",
     {"planner/__init__.py": '__version__ = "0.1.0"\n', "planner/frost.py": FROST_V1}, None),
    ("main", "priya", "2024-02-12T11:05:00+00:00", "Add seed spacing table",
     {"data/spacing.csv": "plant,row_cm,plant_cm\ntomato,90,60\nlettuce,30,25\ncarrot,20,5\n"}, None),
    ("main", "hannah", "2024-02-20T16:45:00+00:00", "Document the zones in README", {"README.md": README_V2}, None),
    ("main", "tomas", "2024-03-01T10:00:00+00:00", "Fix zone 7 frost date (was April 30)",
     {"planner/frost.py": FROST_V1.replace('"zone 7": "April 30"', '"zone 7": "April 15"')}, "v0.1.0"),
    ("main", "seun", "2024-03-04T13:20:00+00:00", "Add companion planting rules",
     {"planner/companions.py": COMPANIONS}, None),
    ("main", "priya", "2024-03-11T09:40:00+00:00", "Bump version to 0.2.0",
     {"planner/__init__.py": '__version__ = "0.2.0"\n'}, "v0.2.0"),
    ("feature/watering-schedule", "hannah", "2024-03-15T15:10:00+00:00", "Add watering schedule module",
     {"planner/watering.py": WATERING}, None),
    ("feature/watering-schedule", "hannah", "2024-03-18T08:55:00+00:00", "Water tomatoes every 2 days in July",
     {"planner/watering.py": WATERING.replace('"July": 3', '"July": 2')}, None),
    ("main", "seun", "2024-03-19T17:25:00+00:00", "Add basil and marigold to plants.csv",
     {"data/plants.csv": PLANTS + "basil,Lamiaceae,6,20\nmarigold,Asteraceae,6,25\n"}, None),
    ("fix/frost-dates", "tomas", "2024-03-21T10:30:00+00:00", "Use April 15 as zone 8 last frost",
     {"planner/frost.py": FROST_V1.replace('"zone 7": "April 30"', '"zone 7": "April 15"')
      .replace('"zone 8": "April 1"', '"zone 8": "April 15"')}, None),
    ("main", "priya", "2024-03-26T12:00:00+00:00", "Add CLI entry point", {"planner/cli.py": CLI}, None),
    ("main", "hannah", "2024-04-02T09:05:00+00:00", "Add harvest calendar", {"planner/harvest.py": HARVEST}, None),
    ("main", "tomas", "2024-04-09T14:40:00+00:00", "Fix typo in companions: potato",
     {"planner/companions.py": COMPANIONS.replace("potatoe", "potato")}, None),
    ("main", "priya", "2024-04-15T11:11:00+00:00", "Release 0.3.0",
     {"planner/__init__.py": '__version__ = "0.3.0"\n', "CHANGELOG.md":
      "# Changelog\n\n## 0.3.0\n- CLI entry point\n- Harvest calendar\n\n## 0.2.0\n- Companion planting\n"}, "v0.3.0"),
]
# branch -> the main commit (by message) it starts from
BRANCH_POINTS = {"feature/watering-schedule": "Bump version to 0.2.0",
                 "fix/frost-dates": "Add basil and marigold to plants.csv"}


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    base = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}
    return subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", *args], cwd=repo,
                          env=base, check=True, capture_output=True, text=True).stdout.strip()


def _write(repo: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def build_git(target: Path) -> None:
    """The garden-planner repository at `target`."""
    def make(repo: Path) -> None:
        _git(repo, "init", "-q", "-b", "main")
        shas: dict[str, str] = {}
        for branch, who, when, message, files, tag in HISTORY:
            if branch != "main" and branch not in _git(repo, "branch", "--list", branch):
                _git(repo, "checkout", "-q", "-b", branch, shas[BRANCH_POINTS[branch]])
            elif shas:  # (before the first commit, main is not born yet)
                _git(repo, "checkout", "-q", branch)
            _write(repo, files)
            _git(repo, "add", "-A")
            name, email = PEOPLE[who]
            env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": when,
                   "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": when}
            _git(repo, "commit", "-q", "-m", message, env=env)
            shas[message] = _git(repo, "rev-parse", "HEAD")
            if tag:
                _git(repo, "tag", tag)
        _git(repo, "checkout", "-q", "main")
        # the work in progress: a staged new file and an unstaged edit
        _write(repo, {"notes/todo.md": "- order seed potatoes\n- test soil pH in bed 3\n"})
        _git(repo, "add", "notes/todo.md")
        _write(repo, {"README.md": README_V2 + "\nRun `garden-planner frost \"zone 6\"` to get a date.\n"})

    _replace(target, make)


SPECIES = [  # code, common name, scientific name, family, status
    ("AMRO", "American Robin", "Turdus migratorius", "Turdidae", "Least Concern"),
    ("BCCH", "Black-capped Chickadee", "Poecile atricapillus", "Paridae", "Least Concern"),
    ("STJA", "Steller's Jay", "Cyanocitta stelleri", "Corvidae", "Least Concern"),
    ("BAEA", "Bald Eagle", "Haliaeetus leucocephalus", "Accipitridae", "Least Concern"),
    ("GBHE", "Great Blue Heron", "Ardea herodias", "Ardeidae", "Least Concern"),
    ("RUHU", "Rufous Hummingbird", "Selasphorus rufus", "Trochilidae", "Near Threatened"),
    ("MAMU", "Marbled Murrelet", "Brachyramphus marmoratus", "Alcidae", "Endangered"),
    ("PIWO", "Pileated Woodpecker", "Dryocopus pileatus", "Picidae", "Least Concern"),
    ("OSFL", "Olive-sided Flycatcher", "Contopus cooperi", "Tyrannidae", "Near Threatened"),
    ("VGSW", "Violet-green Swallow", "Tachycineta thalassina", "Hirundinidae", "Least Concern"),
    ("WEME", "Western Meadowlark", "Sturnella neglecta", "Icteridae", "Least Concern"),
    ("SPTO", "Spotted Towhee", "Pipilo maculatus", "Passerellidae", "Least Concern"),
]
SITES = [  # code, name, habitat, county
    ("NIS-01", "Nisqually Delta Boardwalk", "estuary", "Thurston"),
    ("DSC-02", "Discovery Park Meadow", "meadow", "King"),
    ("MER-03", "Mercer Slough", "wetland", "King"),
    ("CAR-04", "Carkeek Forest Loop", "forest", "King"),
    ("RID-05", "Ridgefield Refuge", "wetland", "Clark"),
]
OBSERVERS = ["Mei Chen", "Jonas Lindgren", "Amara Okoye", "Diego Alvarez"]

METADATA = """\
databases:
  birds:
    title: Puget Sound volunteer bird survey
    description: Point counts by volunteer observers at five sites, spring 2024.
    tables:
      sites:
        description: Survey sites (site_code like NIS-01) with habitat and county.
      species:
        description: Species by four-letter banding code (AMRO = American Robin) with conservation status.
      surveys:
        description: One visit by one observer to one site on one date.
      sightings:
        description: Birds counted per species on each survey.
    queries:
      find_species:
        sql: select code, common_name, scientific_name, family, status from species where common_name like '%' || :name || '%' order by common_name
        description: Find species by part of the common name, e.g. 'heron'.
      site_details:
        sql: select site_code, name, habitat, county from sites where site_code = :site_code
        description: A survey site by its code.
      surveys_at_site:
        sql: select survey_id, survey_date, observer, start_time, duration_min from surveys where site_code = :site_code order by survey_date
        description: Every survey done at a site, oldest first.
      survey_tally:
        sql: select sp.common_name, s.count from sightings s join species sp on sp.code = s.species_code where s.survey_id = :survey_id order by s.count desc
        description: The birds counted on one survey, most numerous first.
      species_count_by_site:
        sql: select v.site_code, sum(s.count) as birds, count(*) as surveys_seen from sightings s join surveys v on v.survey_id = s.survey_id where s.species_code = :code group by v.site_code order by birds desc
        description: How many of one species (by code) were counted at each site.
      observer_surveys:
        sql: select survey_id, site_code, survey_date from surveys where observer = :observer order by survey_date
        description: The surveys one observer did (full name, e.g. 'Mei Chen').
"""


def build_birds(target: Path) -> None:
    """birds.db and metadata.yaml at `target` (a folder)."""
    def make(folder: Path) -> None:
        rng = random.Random(2024)
        db = sqlite3.connect(folder / "birds.db")
        db.executescript("""
            create table sites (site_code text primary key, name text, habitat text, county text);
            create table species (code text primary key, common_name text, scientific_name text, family text,
                                  status text);
            create table surveys (survey_id integer primary key, site_code text references sites, survey_date text,
                                  observer text, start_time text, duration_min integer);
            create table sightings (survey_id integer references surveys, species_code text references species,
                                    count integer);
        """)
        db.executemany("insert into sites values (?, ?, ?, ?)", SITES)
        db.executemany("insert into species values (?, ?, ?, ?, ?)", SPECIES)
        survey_id = 100
        for week in range(6):
            for site_index, (site, *_rest) in enumerate(SITES):
                survey_id += 1
                day = 4 + week * 7 + site_index  # March 4 onwards, one site a day
                month, day = (3, day) if day <= 31 else (4, day - 31)
                observer = OBSERVERS[(week + site_index) % len(OBSERVERS)]
                start = f"{6 + rng.randrange(3):02d}:{rng.choice(['00', '15', '30', '45'])}"
                db.execute("insert into surveys values (?, ?, ?, ?, ?, ?)",
                           (survey_id, site, f"2024-{month:02d}-{day:02d}", observer, start, rng.choice([30, 45, 60])))
                for code, *_ in rng.sample(SPECIES, rng.randrange(4, 8)):
                    db.execute("insert into sightings values (?, ?, ?)", (survey_id, code, rng.randrange(1, 25)))
        db.commit()
        db.close()
        (folder / "metadata.yaml").write_text(METADATA, encoding="utf-8")

    _replace(target, make)


def _replace(target: Path, make) -> None:
    """Build into a fresh folder beside `target`, then swap it in."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        make(fresh)
        old = target.with_name(f".{target.name}-old-{os.getpid()}")
        if target.exists():
            target.rename(old)
        fresh.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


BUILDERS = {"garden-planner": lambda root: build_git(root / "garden-planner"),
            "birds": lambda root: build_birds(root / "birds")}


def build(root: Path, names: list[str] | None = None) -> list[str]:
    """Build the named fixtures (all by default) under `root`; the names built."""
    chosen = list(BUILDERS) if names is None else names
    for name in chosen:
        BUILDERS[name](root)
    return chosen
