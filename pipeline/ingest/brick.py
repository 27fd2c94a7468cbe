"""Read Brick/RDF Turtle graphs deterministically into a Catalog.

Multiple edges rule (documented in docs/ingest.md): where a point has several candidates for
one attribute (class, unit, label, equipment, location, timeseries reference), the candidate
with the smallest IRI or text wins; hasPoint/isPointOf outrank hasPart/isPartOf for equipment.
Every choice among several is recorded as a note in the ingest report.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyoxigraph as ox

from contracts.corpus_metadata import BrickMetadata
from pipeline.core.errors import IngestError
from pipeline.ingest.catalog import Catalog, Point

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
BRICK = "https://brickschema.org/schema/Brick#"
REF = "https://brickschema.org/schema/Brick/ref#"
REC = "https://w3id.org/rec#"
OWL = "http://www.w3.org/2002/07/owl#"
RDFS_CLASS = "http://www.w3.org/2000/01/rdf-schema#Class"

RELATIONS = ("hasPoint", "isPointOf", "hasPart", "isPartOf", "feeds", "isFedBy", "hasLocation", "isLocationOf")


def local_name(iri: str) -> str:
    """The part after the last '#' (or '/'): 'https://x.org#building127.hws' -> 'building127.hws'."""
    for sep in ("#", "/"):
        if sep in iri.rstrip(sep):
            return iri.rstrip(sep).rsplit(sep, 1)[1]
    return iri


def _key(term: object) -> str:
    if isinstance(term, ox.BlankNode):
        return "_:" + term.value
    return term.value  # NamedNode IRI or Literal text


class _Graph:
    """Triples of one file, indexed by subject and predicate, objects kept sorted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.out: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.inv: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.named: set[str] = set()
        try:
            triples = list(ox.parse(path=str(path), format=ox.RdfFormat.TURTLE))
        except (SyntaxError, ValueError, OSError) as exc:
            raise IngestError(f"{path}: cannot read Turtle ({exc}); fix the graph file") from exc
        for triple in triples:
            s, p, o = _key(triple.subject), triple.predicate.value, _key(triple.object)
            self.out[(s, p)].append(o)
            if not isinstance(triple.object, ox.Literal):
                self.inv[(o, p)].append(s)
            if isinstance(triple.subject, ox.NamedNode):
                self.named.add(s)
        for values in (*self.out.values(), *self.inv.values()):
            values.sort()

    def objects(self, s: str, *predicates: str) -> list[str]:
        return sorted({o for p in predicates for o in self.out.get((s, p), ())})

    def subjects(self, o: str, *predicates: str) -> list[str]:
        return sorted({s for p in predicates for s in self.inv.get((o, p), ())})


def _first(values: list[str], what: str, node: str, notes: list[str]) -> str | None:
    if len(values) > 1:
        notes.append(f"{local_name(node)}: {len(values)} candidates for {what}, took {local_name(values[0])}")
    return values[0] if values else None


def _is_entity(graph: _Graph, node: str) -> bool:
    types = graph.objects(node, RDF_TYPE)
    return bool(types) and not any(t.startswith(OWL) or t == RDFS_CLASS for t in types)


def _entity_class(graph: _Graph, node: str) -> str:
    types = graph.objects(node, RDF_TYPE)
    brick = [t for t in types if t.startswith(BRICK)]
    return local_name((brick or types)[0])


def _location(graph: _Graph, start: list[str], notes: list[str]) -> str | None:
    """Nearest location going up from the point through its equipment and their parents."""
    frontier, seen = [n for n in start if n], set()
    for _ in range(6):
        for node in frontier:
            found = graph.objects(node, BRICK + "hasLocation") + graph.subjects(
                node, BRICK + "isLocationOf", REC + "isLocationOf"
            )
            if found:
                return local_name(_first(sorted(set(found)), "location", node, notes))
        seen.update(frontier)
        parents = set()
        for node in frontier:
            parents.update(graph.objects(node, BRICK + "isPartOf"))
            parents.update(graph.subjects(node, BRICK + "hasPart"))
        frontier = sorted(parents - seen)
        if not frontier:
            return None
    return None


def _point(graph: _Graph, node: str, notes: list[str]) -> Point:
    """A point's class, label, unit, equipment and location, by the multiple-edges rule."""
    strong = graph.subjects(node, BRICK + "hasPoint") + graph.objects(node, BRICK + "isPointOf")
    weak = graph.subjects(node, BRICK + "hasPart") + graph.objects(node, BRICK + "isPartOf")
    equipment = _first(sorted(set(strong)) or sorted(set(weak)), "equipment", node, notes)
    unit = _first([u for u in graph.objects(node, BRICK + "hasUnit") if not u.startswith("_:")], "unit", node, notes)
    return Point(
        point_class=_entity_class(graph, node),
        label=(graph.objects(node, RDFS_LABEL) or [local_name(node)])[0],
        unit=local_name(unit) if unit and not unit.startswith("_:") else None,  # a blank-node unit has no stable name
        equipment=local_name(equipment) if equipment else None,
        equipment_type=_entity_class(graph, equipment) if equipment and _is_entity(graph, equipment) else None,
        location=_location(graph, [node, equipment], notes),
        entity_id=local_name(node),
    )


def _read_file(graph: _Graph, meta: BrickMetadata, rel: str, catalog: Catalog) -> None:
    site_id = _read_site(graph, meta, rel, catalog)
    entity_ids = _read_entities(graph, site_id, rel, catalog)
    for node in sorted(entity_ids):
        if meta.stream_id_predicate:
            keys = graph.objects(node, meta.stream_id_predicate)
            if keys:
                key = _first(keys, "stream key", node, catalog.notes)
                catalog.points_by_key.setdefault(key, _point(graph, node, catalog.notes))
                catalog.site_of_key.setdefault(key, site_id)
        else:
            _link_by_reference(graph, node, site_id, catalog)


def _read_site(graph: _Graph, meta: BrickMetadata, rel: str, catalog: Catalog) -> str:
    """The id of the graph's one site, added to the catalog."""
    sites = sorted(n for n in graph.named for t in graph.objects(n, RDF_TYPE) if t in meta.site_classes)
    if len(sites) != 1:
        raise IngestError(
            f"{graph.path}: expected exactly one site (an instance of {', '.join(meta.site_classes)}), "
            f"found {len(sites)}; declare metadata.site_classes or split the graph per site"
        )
    site_iri = sites[0]
    site_id = meta.site_id.format(local=local_name(site_iri))
    site_label = (graph.objects(site_iri, RDFS_LABEL) or [local_name(site_iri)])[0]
    catalog.add_site(site_id, site_label, rel)
    return site_id


def _read_entities(graph: _Graph, site_id: str, rel: str, catalog: Catalog) -> dict[str, str]:
    """The graph's entities by IRI -> entity id, added to the catalog with the relations between them."""
    entity_ids = {}
    for node in sorted(graph.named):
        if _is_entity(graph, node):
            entity_ids[node] = local_name(node)
            catalog.entities.append(
                {
                    "entity_id": local_name(node),
                    "site_id": site_id,
                    "entity_class": _entity_class(graph, node),
                    "label": (graph.objects(node, RDFS_LABEL) or [local_name(node)])[0],
                    "iri": node,
                    "source": rel,
                }
            )
    for node in sorted(entity_ids):
        for rel_name in RELATIONS:
            for target in graph.objects(node, BRICK + rel_name, REC + rel_name):
                if target in entity_ids:
                    catalog.relations.append(
                        {
                            "subject": entity_ids[node],
                            "predicate": rel_name,
                            "object": entity_ids[target],
                            "site_id": site_id,
                        }
                    )
    return entity_ids


def _timeseries_reference(graph: _Graph, node: str, notes: list[str]) -> tuple[str, str] | None:
    """The (value file, column) a point's timeseries reference names, the first in order if several; None if none."""
    refs = []
    for ref in graph.objects(node, REF + "hasExternalReference"):
        ts_id = graph.objects(ref, REF + "hasTimeseriesId")
        stored = graph.objects(ref, REF + "storedAt")
        if ts_id and stored:
            refs.append((stored[0], ts_id[0]))
    if not refs:
        return None
    refs.sort()
    if len(refs) > 1:
        notes.append(f"{local_name(node)}: {len(refs)} timeseries references, took {refs[0][1]} in {refs[0][0]}")
    return refs[0]


def _link_by_reference(graph: _Graph, node: str, site_id: str, catalog: Catalog) -> None:
    """Record the point of a node under the value file and column it references (one value file per site)."""
    notes = catalog.notes
    key = _timeseries_reference(graph, node, notes)
    if key is None:
        return
    file_name, column = key
    point = _point(graph, node, notes)
    if key in catalog.points_by_file:
        notes.append(
            f"{file_name}:{column}: referenced by several points, kept {catalog.points_by_file[key].entity_id}"
        )
        return
    owner = catalog.site_of_file.setdefault(file_name, site_id)
    if owner != site_id:
        raise IngestError(
            f"{graph.path}: points of site {site_id} are stored in {file_name}, which belongs to {owner}; "
            "one value file per site"
        )
    catalog.points_by_file[key] = point


def read_brick(files: list[tuple[Path, str]], meta: BrickMetadata) -> Catalog:
    """Read every graph (path, path relative to the corpus) in sorted order into one Catalog."""
    catalog = Catalog()
    for path, rel in sorted(files, key=lambda item: item[1]):
        _read_file(_Graph(path), meta, rel, catalog)
    return catalog
