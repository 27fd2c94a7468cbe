"""Brick graphs read deterministically, with one documented rule for multiple edges."""

from __future__ import annotations

from contracts.corpus_metadata import BrickMetadata
from pipeline.ingest.brick import local_name, read_brick
from tests.helpers import RAW

META = BrickMetadata(kind="brick", files="*.ttl")

GRAPH = """
@prefix brick: <https://brickschema.org/schema/Brick#> .
@prefix ref: <https://brickschema.org/schema/Brick/ref#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix unit: <http://qudt.org/vocab/unit/> .
@prefix x: <https://x.example.org#> .

x:site a brick:Building ; rdfs:label "Site X" ; brick:hasLocation x:site .
x:loop_b a brick:Hot_Water_Loop ; brick:hasPoint x:t1 ; brick:isPartOf x:site .
x:loop_a a brick:Hot_Water_Loop ; brick:hasPoint x:t1 .
x:pump a brick:Pump ; brick:hasPart x:t1 .
x:t1 a brick:Supply_Water_Temperature_Sensor ;
    brick:hasUnit unit:DEG_F, unit:DEG_C ;
    ref:hasExternalReference [ ref:hasTimeseriesId "t1" ; ref:storedAt "x.csv" ] ,
                             [ ref:hasTimeseriesId "a_first" ; ref:storedAt "x.csv" ] .
"""


def test_multiple_edges_take_the_smallest_and_are_noted(tmp_path):
    path = tmp_path / "x.ttl"
    path.write_text(GRAPH)
    catalog = read_brick([(path, "x.ttl")], META)
    ((key, point),) = catalog.points_by_file.items()
    assert key == ("x.csv", "a_first")
    assert point.equipment == "loop_a"  # hasPoint outranks hasPart; smallest IRI among hasPoint subjects
    assert point.unit == "DEG_C"
    assert any("candidates for equipment" in note for note in catalog.notes)
    assert any("timeseries references" in note for note in catalog.notes)
    assert catalog.site_of_file == {"x.csv": "site"}


def test_reading_twice_gives_identical_catalogs():
    files = sorted((p, p.name) for p in (RAW / "hhw" / "brick").glob("*.ttl"))
    first, second = read_brick(files, META), read_brick(list(reversed(files)), META)
    assert first.points_by_file == second.points_by_file
    assert first.entities == second.entities and first.relations == second.relations


def test_hhw_building_127_has_two_loops_per_temperature_class():
    path = RAW / "hhw" / "brick" / "building_127_condensing_m.ttl"
    catalog = read_brick([(path, path.name)], META)
    supply = {
        k[1]: p.equipment
        for k, p in catalog.points_by_file.items()
        if p.point_class == "Leaving_Hot_Water_Temperature_Sensor"
    }
    assert supply == {"sup": "building127.hws.secondary_loop", "supp": "building127.hws.primary_loop"}


def test_local_name():
    assert local_name("https://hhws.example.org#building127.hws") == "building127.hws"
    assert local_name("http://qudt.org/vocab/unit/DEG_C") == "DEG_C"
