"""Word tables for the question generator (tasks/squad/generator/natural_questions.py): wh-phrases per answer type,
verb forms for do-support and voice changes, words a question may not keep unresolved."""
from __future__ import annotations

from typing import Optional

# answer type (spaCy NER label, or NP for a common noun phrase) -> the wh-phrase asking for it as a subject or
# object; "which + noun" names the kind of thing, as people ask ("Which organization ...")
WH_FOR_TYPE = {
    "PERSON": "who", "ORG": "which organization", "ORG_NAME": "what", "NORP": "which group", "GPE": "which place",
    "LOC": "which place", "FAC": "which building", "EVENT": "which event", "WORK_OF_ART": "what work",
    "LANGUAGE": "which language", "PRODUCT": "what", "LAW": "which law", "NP": "what", "DATE": "when",
    "MONEY": "how much", "CARDINAL": "how many", "QUANTITY": "how much", "PERCENT": "what percentage",
}
# countries and large regions: a place answer among them is asked "In which country ...?"
COUNTRIES = set("""afghanistan albania algeria argentina armenia australia austria azerbaijan bangladesh belarus
belgium bolivia bosnia brazil bulgaria cambodia canada chile china colombia croatia cuba cyprus czechoslovakia
denmark egypt england estonia ethiopia finland france georgia germany ghana greece hungary iceland india
indonesia iran iraq ireland israel italy jamaica japan jordan kazakhstan kenya korea latvia lebanon libya
lithuania luxembourg malaysia mexico mongolia morocco nepal netherlands nigeria norway pakistan peru
philippines poland portugal prussia romania russia scotland serbia singapore slovakia slovenia somalia spain
sudan sweden switzerland syria taiwan thailand tunisia turkey uganda ukraine uruguay venezuela vietnam wales
yugoslavia zimbabwe""".split()) | {"united states", "the united states", "united kingdom", "the united kingdom",
                                    "soviet union", "the soviet union", "new zealand", "south africa"}
# places people ask about by their kind ("In which city ...?", "On which continent ...?"): a place answer among
# them is asked that way half of the time, "where" otherwise (countries: always "which country", above)
CITIES = {c.strip() for c in """amsterdam, athens, atlanta, baghdad, baltimore, bangkok, barcelona, beijing, belfast,
berlin, bombay, boston, brussels, bucharest, budapest, buenos aires, cairo, calcutta, canberra, cape town, chicago,
cologne, copenhagen, dallas, delhi, detroit, dublin, edinburgh, florence, frankfurt, geneva, glasgow, hamburg,
havana, helsinki, hong kong, houston, istanbul, jakarta, jerusalem, johannesburg, kabul, karachi, kiev, kyoto,
lagos, las vegas, leipzig, lima, lisbon, liverpool, london, los angeles, madrid, manchester, manila, marseille,
melbourne, mexico city, miami, milan, montreal, moscow, mumbai, munich, nairobi, naples, new delhi, new orleans,
new york city, oslo, ottawa, oxford, cambridge, paris, philadelphia, prague, rio de janeiro, rome, san francisco,
santiago, seattle, seoul, shanghai, st. petersburg, stockholm, sydney, tehran, tel aviv, tokyo, toronto, venice,
vienna, warsaw, zurich, agra, alexandria, antwerp, bologna, bordeaux, bristol, cardiff, chennai, dresden, dubai,
genoa, krakow, lyon, mecca, montevideo, nagasaki, hiroshima, osaka, pittsburgh, porto, salzburg, seville,
stuttgart, taipei, turin, valencia, vancouver, verona, weimar, bonn, salamanca, babylon, carthage, constantinople,
byzantium, sparta, thebes, kolkata, beirut, damascus, riyadh, lahore, hanoi, saigon, ho chi minh city, kingston,
nassau, bogota, caracas, quito, la paz, brasilia, sao paulo, auckland, wellington, perth, brisbane, adelaide,
minneapolis, denver, phoenix, san diego, cleveland, cincinnati, st. louis, kansas city, nashville, memphis,
new haven, princeton, berkeley, hollywood, harlem, brooklyn, manhattan, westminster, coventry, leeds,
birmingham, sheffield, nottingham, york, bath, canterbury, dover, plymouth, aberdeen, cork, galway""".split(",")}
US_STATES = {s.strip() for s in """alabama, alaska, arizona, arkansas, california, colorado, connecticut, delaware,
florida, hawaii, idaho, illinois, indiana, iowa, kansas, kentucky, louisiana, maine, maryland, massachusetts,
michigan, minnesota, mississippi, missouri, montana, nebraska, nevada, new hampshire, new jersey, new mexico,
north carolina, north dakota, ohio, oklahoma, oregon, pennsylvania, rhode island, south carolina, south dakota,
tennessee, texas, utah, vermont, virginia, west virginia, wisconsin, wyoming""".split(",")}
CONTINENTS = {"africa", "antarctica", "asia", "europe", "north america", "south america", "australia", "oceania"}
MOUNTAIN_RANGES = {"the alps", "alps", "the andes", "andes", "the himalayas", "himalayas", "the rockies",
                   "rocky mountains", "the rocky mountains", "the pyrenees", "pyrenees", "the urals", "urals",
                   "the carpathians", "carpathians", "the appalachians", "appalachian mountains", "the caucasus",
                   "caucasus", "atlas mountains", "the atlas mountains", "apennines", "the apennines"}


def place_kind(name: str) -> Optional[str]:
    """"country" / "city" / "state" / "continent" / "mountain range" for a place name in the tables above."""
    name = name.lower()
    for kind, table in (("country", COUNTRIES), ("continent", CONTINENTS), ("state", US_STATES), ("city", CITIES),
                        ("mountain range", MOUNTAIN_RANGES)):
        if name in table:
            return kind
    return None


# the last word of a name that says what kind of thing it names: "the Black Sea" -> "Which sea ...?", as people
# ask (the answer keeps the word: the reader must learn that a question word can sit inside the answer)
CLASS_NOUNS = set("""sea ocean river lake island islands mountains mountain range desert bay gulf strait canal
peninsula valley dynasty empire kingdom republic university college school church cathedral abbey bridge tower
palace castle ship war battle party army navy company band prize award museum street square park forest station
airport temple festival league cup treaty revolution province county city mosque stadium hospital theatre""".split())
MEASURE_ADJECTIVES = {"tall", "high", "long", "wide", "deep", "old", "large", "heavy", "thick"}
DURATION_UNITS = {"year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
                  "minute", "minutes", "decade", "decades", "century", "centuries"}
# pronouns and demonstratives: a question keeping one has nothing to point at without its paragraph
UNRESOLVED = {"he", "she", "it", "they", "him", "her", "his", "its", "their", "them", "hers", "theirs",
              "this", "these", "those", "itself", "himself", "herself", "themselves", "i", "we", "you", "us",
              "our", "my", "your", "me", "there", "such", "which", "who", "whom", "whose", "that", "former",
              "latter", "here"}
DO_SUPPORT = {"VBD": "did", "VBZ": "does", "VBP": "do"}
# past participle -> simple past where they differ (the voice change "was written by X" -> "Who wrote ...")
PAST_OF_PARTICIPLE = {
    "written": "wrote", "taken": "took", "given": "gave", "known": "knew", "shown": "showed", "begun": "began",
    "drawn": "drew", "driven": "drove", "eaten": "ate", "fallen": "fell", "flown": "flew", "forgotten": "forgot",
    "gotten": "got", "grown": "grew", "hidden": "hid", "ridden": "rode", "risen": "rose", "seen": "saw",
    "spoken": "spoke", "stolen": "stole", "sworn": "swore", "thrown": "threw", "worn": "wore", "chosen": "chose",
    "frozen": "froze", "done": "did", "sung": "sang", "broken": "broke", "beaten": "beat", "bitten": "bit",
    "forbidden": "forbade", "forgiven": "forgave", "mistaken": "mistook", "shaken": "shook", "undertaken":
    "undertook", "overtaken": "overtook", "withdrawn": "withdrew", "proven": "proved", "sewn": "sewed",
    "blown": "blew", "woven": "wove", "awoken": "awoke", "rewritten": "rewrote", "overthrown": "overthrew",
    "forsaken": "forsook", "arisen": "arose", "become": "became", "come": "came", "run": "ran", "sunk": "sank",
    "drunk": "drank", "rung": "rang", "swum": "swam", "shrunk": "shrank", "sprung": "sprang", "stricken": "struck",
    "born": "bore", "borne": "bore", "torn": "tore", "lain": "lay", "slain": "slew", "strewn": "strewed",
}
PARTICIPLE_OF_PAST = {past: part for part, past in PAST_OF_PARTICIPLE.items() if part not in ("born", "borne")}
PARTICIPLE_OF_PAST.update({"bore": "borne", "became": "become", "came": "come", "ran": "run"})


def third_person(lemma: str) -> str:
    """present tense, third person singular: "design" -> "designs" ("Who designs ...?")."""
    if lemma == "be":
        return "is"
    if lemma == "have":
        return "has"
    if lemma.endswith(("s", "x", "z", "ch", "sh", "o")):
        return lemma + "es"
    if lemma.endswith("y") and len(lemma) > 1 and lemma[-2] not in "aeiou":
        return lemma[:-1] + "ies"
    return lemma + "s"
