"""``manage.py references codex-s [--add fb15k-237] [--remove NAME]`` — the KGs a KG's triples are checked against.

Lists a KG's reference KGs with how many of its entities each matches (by Wikidata id) and how many of its
relations align with the reference's; ``--add`` and ``--remove`` change them. The structural calibration weighs
the references it was fitted with, so a change refits the ready model's calibration (a few minutes;
``--no-recalibrate`` leaves that to ``manage.py train_kge KG --recalibrate``). See verifier/structure/reference.py.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from verifier.models import KnowledgeGraph, StructuralModel
from verifier.structure.fitting import calibrate_structural, calibration_line
from verifier.structure.reference import ReferenceIndex, reference_ids


class Command(BaseCommand):
    help = "List or change the reference KGs a KG's triples are checked against."

    def add_arguments(self, parser):
        parser.add_argument("kg", help="the local KG's name")
        parser.add_argument("--add", action="append", default=[], metavar="KG", help="a loaded local KG to check against")
        parser.add_argument("--remove", action="append", default=[], metavar="KG", help="a reference to stop checking against")
        parser.add_argument("--no-recalibrate", action="store_true", help="do not refit the calibration after a change")

    def handle(self, *args, **options):
        kg = _loaded(options["kg"])
        if kg.kind != KnowledgeGraph.Kind.LOCAL:
            raise CommandError(f"{kg.name} is a SPARQL endpoint: only a local KG has a structural model to weigh references")
        added = [_loaded(name) for name in options["add"]]
        removed = [_loaded(name) for name in options["remove"]]
        for reference in added:
            if reference.pk == kg.pk:
                raise CommandError(f"{kg.name} cannot be its own reference")
            if reference.kind != KnowledgeGraph.Kind.LOCAL:
                raise CommandError(f"{reference.name} is a SPARQL endpoint; a reference must be a KG loaded in KGV")
        before = reference_ids(kg)
        kg.references.add(*added)
        kg.references.remove(*removed)
        for reference in kg.references.order_by("name"):
            index = ReferenceIndex(kg, reference)
            aligned = sum(bool(readings) for readings in index.aligned.values())
            self.stdout.write(f"{reference.name}: matches {len(index.matched):,} of {kg.entities.count():,} entities by Wikidata id; "
                              f"{aligned} of {kg.relations.count()} relations align with its own")
        if not kg.references.exists():
            self.stdout.write(f"{kg.name} has no reference KG.")
        if reference_ids(kg) == before:
            return
        model = StructuralModel.objects.ready_for(kg)
        if model is None:
            self.stdout.write(f"{kg.name} has no ready structural model yet: its first calibration will weigh the references.")
        elif options["no_recalibrate"]:
            self.stdout.write("The calibration weighs the references it was fitted with until: "
                              f"manage.py train_kge {kg.name} --recalibrate")
        else:
            self.stdout.write(f"Recalibrating structural model #{model.pk} of {kg.name} for its references…")
            try:
                metrics = calibrate_structural(model)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(self.style.SUCCESS(f"Recalibrated: {calibration_line(metrics)}"))


def _loaded(name: str) -> KnowledgeGraph:
    kg = KnowledgeGraph.objects.filter(name=name).first()
    if kg is None or (kg.kind == KnowledgeGraph.Kind.LOCAL and kg.version == 0):
        raise CommandError(f"the KG {name!r} is not loaded; run manage.py load_kg first")
    return kg
