"""The words an English sentence uses for a KG relation, so a triple is kept only when the claim says it.

A relation is *stated* by a sentence that uses its label or an alias, every content word of its label (by stem:
"educated at" in "she was educated at …", "citizenship" in "a citizen of"), or one of its cue patterns below.
The cues are keyed by Wikidata property id (CoDEx and every Wikidata-based KG share them); a KG with other ids
relies on its labels and aliases.

*Strong* cues name the relation ("born", "married", "buried"). *Weak* cues are grammar several relations share —
the copula of "X is a singer" for an occupation, "in" for a location — and state a relation only when both
entities the triple names are of the kinds the relation links in the KG (verifier/claims/grounding.py checks).

Every pattern is a regular expression over the lower-cased sentence in which the entities it names are masked
and the negation words are blanked, so "is not a" reads as "is a" and a name ("Royal College of Music") is no cue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

COPULA = r"\b(?:is|was|are|were|be|been|being|became|become|becomes|remains|remained|works as|worked as|working as)" \
         r"\s+(?:also\s+|still\s+|once\s+|later\s+)?(?:a|an|the)\b"
LOCATED = r"\b(?:in|on|within|inside)\b"

STRONG: dict[str, tuple[str, ...]] = {
    "P19": (r"\bborn\b", r"\bbirth", r"\bnative of\b", r"\bhails? from\b"),
    "P20": (r"\bdied?\b", r"\bdies\b", r"\bdeath\b", r"\bpassed away\b", r"\bdead\b"),
    "P509": (r"\bdied (?:of|from)\b", r"\bkilled by\b", r"\bsuccumbed to\b", r"\bcause of (?:his |her |their )?death\b",
             r"\bdeath (?:was caused by|from)\b"),
    "P119": (r"\bburied\b", r"\bburial\b", r"\binterred\b", r"\bgrave\b", r"\bresting place\b"),
    "P27": (r"\bcitizen", r"\bnationality\b", r"\bnational of\b", r"\bpassport\b"),
    "P106": (r"\boccupation\b", r"\bprofession", r"\bjob\b", r"\bcareer\b", r"\bby trade\b", r"\bworks? as\b",
             r"\bworked as\b", r"\bworking as\b", r"\bemployed as\b"),
    "P463": (r"\bmember", r"\bbelongs? to\b", r"\bbelonged to\b", r"\bjoined\b", r"\bjoins\b", r"\bpart of\b"),
    "P530": (r"\bdiplomatic", r"\brelations? with\b", r"\bembass", r"\bties with\b", r"\brecogni[sz]es\b"),
    "P136": (r"\bgenre", r"\bstyle\b", r"\bmusic\b"),
    "P1412": (r"\bspeaks?\b", r"\bspoke\b", r"\bspoken\b", r"\bspeaking\b", r"\blanguages?\b", r"\bwrites? in\b",
              r"\bwrote in\b", r"\bwriting in\b", r"\bfluent\b", r"\btongue\b"),
    "P1303": (r"\binstrument", r"\bplays?\b", r"\bplayed\b", r"\bplaying\b", r"\bplayer\b"),
    "P264": (r"\blabel\b", r"\bsigned (?:to|with|by)\b", r"\brecords? (?:for|with|on)\b", r"\brecorded (?:for|with|on)\b",
             r"\breleased (?:on|by|through|under)\b"),
    "P737": (r"\binfluence", r"\binspired\b", r"\bdrew on\b", r"\bfollower of\b", r"\bshaped by\b"),
    "P69": (r"\beducated\b", r"\beducation\b", r"\bstud(?:y|ied|ies|ying)\b", r"\battend", r"\bgraduat",
            r"\balumn", r"\bstudent\b", r"\bwent to\b", r"\bschooled\b", r"\btrained at\b"),
    "P101": (r"\bfield", r"\bworks? (?:in|on)\b", r"\bworked (?:in|on)\b", r"\bworking (?:in|on)\b", r"\bresearch",
             r"\bspeciali[sz]", r"\bcontribut", r"\bexpert\b", r"\bscholar of\b", r"\bstud(?:y|ied|ies|ying)\b"),
    "P140": (r"\breligio", r"\bfaith\b", r"\bbeliever\b", r"\bpractis", r"\bpractic", r"\bconvert", r"\badherent",
             r"\bfollow(?:s|ed|er|ing)?\b", r"\bdevout\b"),
    "P172": (r"\bethnic", r"\bdescent\b", r"\bheritage\b", r"\bbackground\b", r"\bancestry\b", r"\borigins?\b"),
    "P108": (r"\bemploy", r"\bworks? (?:for|at)\b", r"\bworked (?:for|at)\b", r"\bworking (?:for|at)\b", r"\bhired\b",
             r"\bjob at\b", r"\btaught at\b", r"\bteaches at\b", r"\bprofessor at\b", r"\bon the staff\b"),
    "P551": (r"\blived\b", r"\blives\b", r"\bliving\b", r"\bresid", r"\bhome\b", r"\bsettled\b", r"\bmoved to\b",
             r"\bbased in\b"),
    "P30": (r"\bcontinent\b",),
    "P37": (r"\bofficial language", r"\blanguages?\b", r"\bspoken\b"),
    "P17": (r"\bcountry\b",),
    "P102": (r"\bparty\b", r"\bparties\b"),
    "P361": (r"\bpart of\b", r"\bbelongs? to\b", r"\bbelonged to\b", r"\bcomponent of\b"),
    "P3373": (r"\bsibling", r"\bbrothers?\b", r"\bsisters?\b"),
    "P26": (r"\bspouse", r"\bmarri", r"\bwife\b", r"\bhusband\b", r"\bwed\b", r"\bwedded\b"),
    "P135": (r"\bmovement\b", r"\bschool of\b", r"\bassociated with\b"),
    "P451": (r"\bpartner", r"\brelationship\b", r"\bdated\b", r"\blover\b", r"\bgirlfriend\b", r"\bboyfriend\b",
             r"\bcompanion\b"),
    "P159": (r"\bheadquarter", r"\bhead office\b", r"\bbased in\b", r"\bseat\b"),
    "P40": (r"\bchild", r"\bsons?\b", r"\bdaughters?\b", r"\bfather of\b", r"\bmother of\b", r"\bparent of\b"),
    "P1050": (r"\bsuffer", r"\bcondition\b", r"\bdiagnos", r"\bdisease\b", r"\billness\b", r"\bdisorder\b",
              r"\bafflicted\b", r"\blived with\b"),
    "P2348": (r"\bperiod\b", r"\bera\b", r"\bduring\b", r"\bdates? (?:from|to)\b"),
    "P161": (r"\bcast\b", r"\bstarr", r"\bstars\b", r"\bacted\b", r"\bactor\b", r"\bactress\b", r"\bappear"),
    "P35": (r"\bhead of state\b", r"\bpresident\b", r"\bking\b", r"\bqueen\b", r"\bmonarch\b", r"\bruled\b",
            r"\bruler\b", r"\bled by\b", r"\bleader\b"),
    "P740": (r"\bformed\b", r"\bformation\b", r"\bfounded\b", r"\bestablished\b", r"\bstarted\b", r"\bbegan\b",
             r"\bset up\b"),
    "P749": (r"\bparent\b", r"\bowned by\b", r"\bsubsidiary\b", r"\bdivision of\b", r"\bpart of\b"),
    "P495": (r"\borigin\b", r"\bcomes? from\b", r"\bcame from\b", r"\bmade in\b", r"\bproduced in\b"),
    "P112": (r"\bfound(?:ed|er|ers|ing)\b", r"\bestablished\b", r"\bset up\b", r"\bco-?founded\b"),
    "P138": (r"\bnamed\b", r"\bnamesake\b"),
    "P840": (r"\bset in\b", r"\btakes place\b", r"\btook place\b", r"\bnarrative\b"),
    "P800": (r"\bwrote\b", r"\bwritten\b", r"\bauthor of\b", r"\bknown for\b", r"\bcreated\b", r"\bcomposed\b",
             r"\bfamous for\b", r"\bnotable work", r"\bbest known\b", r"\bworks?\b"),
    "P3095": (r"\bpractis", r"\bpractic", r"\bpractitioner"),
    "P50": (r"\bauthor", r"\bwrote\b", r"\bwritten\b", r"\bwriter\b"),
    "P57": (r"\bdirect",),
    "P170": (r"\bcreat", r"\bmade by\b", r"\binvent", r"\bdesigned\b"),
    "P84": (r"\barchitect", r"\bdesigned\b"),
    "P36": (r"\bcapital\b",),
    "P47": (r"\bborder", r"\bneighbo", r"\badjacent\b", r"\bnext to\b"),
    "P54": (r"\bteam\b", r"\bclub\b", r"\bplay(?:s|ed|ing)? for\b", r"\bsigned (?:for|with|by)\b"),
    "P641": (r"\bsport\b", r"\bplays?\b", r"\bplayed\b", r"\bplayer\b", r"\bathlete\b", r"\bcompet"),
    "P123": (r"\bpublish",),
    "P488": (r"\bchair", r"\bpresident\b", r"\bled by\b", r"\bheaded by\b"),
    "P169": (r"\bceo\b", r"\bchief executive", r"\brun by\b", r"\bled by\b"),
    "P194": (r"\blegislat", r"\bparliament\b", r"\bcongress\b", r"\bassembly\b"),
    "P2578": (r"\bstud(?:y|ied|ies|ying)\b",),
    "P149": (r"\bstyle\b", r"\barchitecture\b"),
    "P452": (r"\bindustry\b", r"\bsector\b", r"\boperates in\b", r"\bbusiness\b"),
    "P466": (r"\boccupant", r"\boccupie[sd]\b", r"\boccupy", r"\bhome (?:of|to)\b", r"\bused by\b", r"\btenant"),
    "P2283": (r"\buses\b", r"\bused\b", r"\busing\b"),
    "P2176": (r"\btreat", r"\bdrug\b", r"\btherap", r"\bcured?\b", r"\bmedication\b"),
    "P780": (r"\bsymptom", r"\bsigns?\b", r"\bcauses?\b"),
    "P4552": (r"\brange\b", r"\bmountains\b"),
    "P1056": (r"\bproduc", r"\bmakes\b", r"\bmade\b", r"\bmanufactur"),
    "P113": (r"\bhub\b",),
    "P407": (r"\blanguage", r"\bwritten in\b", r"\bsung in\b"),
    "P131": (r"\badministrative\b", r"\bprovince\b", r"\bstate of\b", r"\bcounty\b", r"\bregion\b"),
}

WEAK: dict[str, tuple[str, ...]] = {
    "P106": (COPULA, r"\bas an?\b"),
    "P136": (COPULA, r"\bplays?\b", r"\bplayed\b", r"\bplaying\b", r"\bperforms?\b", r"\bperformed\b", r"\bsings?\b",
             r"\bsang\b", r"\bwrites?\b", r"\bwrote\b", r"\bknown for\b", r"\bmusician\b", r"\bsinger\b"),
    "P1050": (r"\bhad\b", r"\bhas\b", r"\bhave\b", r"\bwith\b"),
    "P17": (LOCATED, r"\bof\b"),
    "P131": (LOCATED, r"\bof\b"),
    "P30": (LOCATED, r"\bof\b"),
    "P159": (LOCATED,),
    "P740": (LOCATED, r"\bfrom\b"),
    "P361": (LOCATED, r"\bof\b"),
    "P495": (r"\bfrom\b",),
    "P172": (COPULA,),
    "P140": (COPULA,),
    "P27": (COPULA, r"\bfrom\b"),
}

# Words of a relation's label that say nothing on their own.
STOPWORDS = frozenset("a an and as at by for from in is it of on or the to with".split())
STEM = 5  # letters of a label word a sentence's word must start with ("citizenship" → "citiz", as "citizen")


@dataclass(frozen=True)
class RelationCues:
    names: tuple[re.Pattern, ...]  # the label and aliases verbatim
    stems: tuple[str, ...]  # the label's content words, each cut to STEM letters; all present state the relation
    strong: tuple[re.Pattern, ...]
    weak: tuple[re.Pattern, ...]


@cache
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern, ...]:
    return tuple(re.compile(p) for p in patterns)


def cues(external_id: str, label: str, aliases: tuple[str, ...] = ()) -> RelationCues:
    names = tuple(rf"(?<!\w){re.escape(n.lower())}(?!\w)" for n in (label, *aliases) if n and len(n) > 2)
    words = [w for w in re.findall(r"[a-z]+", label.lower()) if w not in STOPWORDS and len(w) > 2]
    stems = tuple(w[:STEM] for w in words) if len(words) > 1 else ()  # one word alone is its label, matched above
    return RelationCues(_compiled(names), stems, _compiled(STRONG.get(external_id, ())), _compiled(WEAK.get(external_id, ())))
