"""The real En-De corpus (task.data.source=real) on small fixtures in each package's own format: a
LibreOffice help page pair (HTML), GNOME help Mallard page pairs, Fish Fillets Lua dialogue files and the
Ding dictionary fixture. Alignment, cleaning, deduplication, the document split and the cached files."""
from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import ROOT, typed_data
from tasks.corpora.parallel_text import (Document, align_help_pages, align_mallard_pages, dedupe, dialog_pairs,
                                      keep_pair, normalise, read_fillets, read_gnome, read_libreoffice,
                                      split_by_document)
from tasks.translation.data import load_pairs
from tasks.corpora.parallel_corpus import REAL_HINT, build_corpus, near_duplicates, prepare_real
from tasks.translation.schema import RealCorpusConfig, TranslationDataConfig

FIX = ROOT / "tests" / "fixtures" / "translation"
REAL = FIX / "real"
LO = REAL / "libreoffice"
PAGE = "text/swriter/guide/insert_beforetable.html"


def real_config(**real):
    cfg = {"sources": ["libreoffice", "gnome", "fillets", "dictionary"], "libreoffice_help": str(LO),
           "gnome_help": str(REAL / "help"), "fillets_scripts": str(REAL / "fillets"), "dictionary_block_lines": 4,
           "min_words": 1, "max_words": 60, "valid_fraction": 0.0, "test_fraction": 0.0, "min_valid": 1,
           "min_test": 2, "max_pairs": None, "train_extra": None}
    cfg.update(real)
    return typed_data("translation", TranslationDataConfig, source="real", real=RealCorpusConfig(**cfg),
                      dictionary_path=str(FIX / "de-en.ding"), min_words=5, split_seed=1234)


def test_help_pages_align_by_id_without_markup_hidden_variants_or_code():
    en, de = ((LO / lang / PAGE).read_text(encoding="utf-8") for lang in ("en-US", "de"))
    pairs = align_help_pages(en, de)
    assert pairs[0] == ("Inserting Text Before a Table at the Top of Page",
                        "Text vor einer Tabelle am Seitenanfang einfügen")
    # the switch's default variant (Alt), not the hidden macOS one (Option / Wahl)
    assert pairs[1] == ("If you want to insert text before a table, click in the first cell and press Enter or "
                        "Alt+Enter.", "Um Text vor einer Tabelle einzufügen, klicken Sie in die erste Zelle und "
                        "drücken Sie Eingabe oder Alt+Eingabe.")
    english = [e for e, _ in pairs]
    assert not any("MsgBox" in e for e in english)                     # code paragraphs are not language
    assert "This paragraph was not translated yet." not in english       # an id only in English: no pair
    assert ("LibreOffice keeps the table where it is.", "LibreOffice lässt die Tabelle, wo sie ist.") in pairs
    assert not any("LibreOffice 7.4 Help" in e or "debug" in e for e in english)   # page chrome has no ids
    assert ("Click OK.", "Klicken Sie auf OK.") in pairs
    # the same ids, whatever order German lists them in
    assert align_help_pages(en, de.replace('id="par_id3150004"', 'id="par_id9999999"')) == \
        [p for p in pairs if p[0] != "Table"]


def test_mallard_pages_align_block_by_block_and_differing_structures_are_skipped():
    folder = REAL / "help"
    en, de = ((folder / lang / "gnome-help" / "a11y-bouncekeys.page").read_text(encoding="utf-8") for lang in ("C", "de"))
    pairs = align_mallard_pages(en, de)
    assert pairs[0] == ("Ignore quickly-repeated key presses of the same key.",
                        "Schnell wiederholte Tastendrücke der gleichen Taste ignorieren.")
    assert ("Click on Settings.", "Klicken Sie auf Einstellungen.") in pairs
    assert ("Turn on bounce keys to ignore key presses that are rapidly repeated.",
            "Schalten Sie Springende Tasten ein, um das Drücken von Tasten zu ignorieren, wenn es schnell "
            "wiederholt wird.") in pairs                                   # inline markup gone, lines joined
    assert not any("gsettings" in e or "McCance" in e or "Blättermann" in d for e, d in pairs)  # screen, credits
    assert len(pairs) == 7
    skipped = []
    docs = list(read_gnome(folder, skipped))
    # mouse-doubleclick: the German page has one paragraph more; power-batterylife: no German page
    assert [d.doc_id for d in docs] == ["gnome-help/a11y-bouncekeys", "gnome-help/shell-overview"]
    assert skipped == ["gnome-help/mouse-doubleclick"]


def test_lua_dialogue_pairs_with_escapes_and_line_breaks():
    assert dialog_pairs(REAL / "fillets" / "fish_house" / "dialogs_de.lua")[:2] == [
        ("You need to realize that the steel cylinder surrounding us",
         "Du musst verstehen, dass der Stahlzylinder um uns herum"),
        ('We call it "shell-less".', 'Wir sagen dazu "Schalenloser".')]
    airplane = next(d for d in read_fillets(REAL / "fillets") if d.doc_id == "airplane")
    assert len(airplane.pairs) == 4   # the line without a dialogStr is no pair
    assert "This line has no German text." not in [e for e, _ in airplane.pairs]


def test_cleaning_drops_empty_identical_garbled_and_overlong_pairs():
    assert keep_pair("Click OK.", "Klicken Sie auf OK.", 1, 60)
    assert not keep_pair("OK", "OK", 1, 60)                           # untranslated
    assert not keep_pair("Print.", "print", 1, 60)                    # identical once normalised
    assert not keep_pair("", "Drucken", 1, 60) and not keep_pair("...", "Drucken", 1, 60)
    assert not keep_pair("Broken \ufffd text here", "Kaputter Text hier", 1, 60)
    assert not keep_pair("Yes", "Ja, und dann noch ein sehr langer Satz, der nicht dazugehört.", 1, 60)
    assert not keep_pair("one two three", "eins zwei drei", 4, 60) and not keep_pair("a b c", "x y z", 1, 2)
    assert normalise("Step 2:  Click  «OK»!") == normalise("step 1 - click ok") == "step click ok"


def test_dedupe_on_normalised_text_keeps_the_first_and_removes_both_directions():
    docs = [Document("libreoffice", "a", [("Click OK.", "Klicken Sie auf OK."), ("Table", "Tabelle")]),
            Document("libreoffice", "b", [("Click  OK!", "Bitte OK klicken."),      # same English, normalised
                                          ("Tables", "Tabelle"),                   # same German
                                          ("The dialog closes.", "Der Dialog wird geschlossen.")]),
            Document("gnome", "c", [("Table", "Die Tabelle")])]
    out, removed = dedupe(docs)
    assert removed == 3 and [d.doc_id for d in out] == ["a", "b"]    # c lost its only pair
    assert out[1].pairs == [("The dialog closes.", "Der Dialog wird geschlossen.")]


def test_split_by_document_keeps_documents_whole_and_follows_the_seed():
    docs = [Document(src, f"{src}{i}", [(f"{src} {i} {j}", f"x {i} {j}") for j in range(1 + i % 3)])
            for src in ("libreoffice", "fillets") for i in range(30)]
    splits = split_by_document(docs, {"libreoffice": (5, 8), "fillets": (3, 3)}, seed=1)
    ids = {s: [d.doc_id for d in v] for s, v in splits.items()}
    assert sum(map(len, ids.values())) == 60 and len(set(sum(ids.values(), []))) == 60  # each doc once
    for split, want in (("test", {"libreoffice": 8, "fillets": 3}), ("valid", {"libreoffice": 5, "fillets": 3})):
        for src, n in want.items():
            got = sum(len(d.pairs) for d in splits[split] if d.source == src)
            assert n <= got < n + 3, (split, src, got)               # filled with whole documents
    assert split_by_document(docs, {"libreoffice": (5, 8), "fillets": (3, 3)}, seed=1) == splits
    assert split_by_document(docs, {"libreoffice": (5, 8), "fillets": (3, 3)}, seed=2)["test"] != splits["test"]


def test_real_corpus_from_fixtures_no_test_sentence_in_training(tmp_path, capsys):
    rows, stats = build_corpus(real_config())
    assert stats["sources"] == ["libreoffice", "gnome", "fillets", "dictionary"] and stats["missing"] == []
    assert stats["gnome_pages_skipped"] == 1 and stats["removed_by_dedupe"] >= 3
    docs = {s: {(r[2], r[3]) for r in rows[s]} for s in rows}
    assert not (docs["train"] & docs["test"]) and not (docs["train"] & docs["valid"]) and not (docs["valid"] & docs["test"])
    keys = {s: {normalise(r[lang]) for r in rows[s] for lang in (0, 1)} for s in rows}
    assert not (keys["train"] & keys["test"]) and not (keys["train"] & keys["valid"])
    assert {r[2] for r in rows["test"]} == {"libreoffice", "gnome", "fillets", "dictionary"}
    assert stats["overlap"]["test"]["de_verbatim_in_train"] == 0 == stats["overlap"]["test"]["en_verbatim_in_train"]
    for source, per in stats["per_split"].items():
        assert sum(per[s]["pairs"] for s in per) == stats["after_dedupe"][source]
    # the cached plain text files, one sentence a line, and the pairs the task reads from them
    folder = prepare_real(real_config(), tmp_path)
    en = (folder / "test.en").read_text(encoding="utf-8").splitlines()
    assert en == [r[0] for r in rows["test"]]
    assert len((folder / "test.de").read_text(encoding="utf-8").splitlines()) == len(en)
    assert json.loads((folder / "stats.json").read_text())["overlap"] == stats["overlap"]
    pairs = load_pairs(dataclasses.replace(real_config(), cache_dir=str(tmp_path)), ("en", "de"))
    assert "real corpus files: " + str(folder) in capsys.readouterr().out
    assert pairs["test"][0] == {"en": rows["test"][0][0], "de": rows["test"][0][1], "domain": rows["test"][0][2]}
    assert prepare_real(real_config(), tmp_path) == folder and "building" not in capsys.readouterr().out  # cached


def test_missing_packages_name_the_apt_line(tmp_path, capsys):
    none = dataclasses.replace(real_config(libreoffice_help=str(tmp_path / "no"), gnome_help=str(tmp_path / "no"),
                                           fillets_scripts=str(tmp_path / "no")), dictionary_path=str(tmp_path / "no"))
    with pytest.raises(FileNotFoundError, match=REAL_HINT):
        build_corpus(none)
    assert REAL_HINT == ("apt-get install libreoffice-help-en-us libreoffice-help-de gnome-user-docs "
                         "fillets-ng-data trans-de-en")
    rows, stats = build_corpus(real_config(gnome_help=str(tmp_path / "no")))   # the others still build
    assert stats["missing"] == ["gnome"] and "apt-get install gnome-user-docs" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"unknown \['wikipedia'\]"):
        build_corpus(real_config(sources=["libreoffice", "wikipedia"]))
    with pytest.raises(ValueError, match="must be en and de"):
        load_pairs(dataclasses.replace(real_config(), cache_dir=str(tmp_path)), ("en", "fr"))


def test_dictionary_part_is_capped_by_whole_blocks_and_near_duplicates_are_found():
    full, _ = build_corpus(real_config())
    capped, stats = build_corpus(real_config(max_pairs={"dictionary": 5}))
    count = lambda rows: sum(r[2] == "dictionary" for s in rows for r in rows[s])
    assert 5 <= count(capped) < count(full)
    assert near_duplicates(["Der Hund schläft unter dem Tisch!"], ["der Hund schläft unter den Tisch", "Katze"]) == 1
    assert near_duplicates(["Der Hund schläft."], ["Die Katze trinkt Milch.", "Der Hund bellt laut."]) == 0


def test_libreoffice_reader_pairs_pages_present_in_both_languages(tmp_path):
    docs = list(read_libreoffice(LO / "en-US", LO / "de"))
    assert [d.doc_id for d in docs] == ["text/shared/01/about_meta_tags", "text/swriter/guide/insert_beforetable"]
    (tmp_path / "en-US" / "text").mkdir(parents=True)
    (tmp_path / "de").mkdir()
    (tmp_path / "en-US" / "text" / "only_en.html").write_text("<p id='par_id1'>Hello there</p>")
    assert list(read_libreoffice(tmp_path / "en-US", tmp_path / "de")) == []


def test_documents_left_out_by_the_cap_join_train_only_and_valid_test_stay_the_same():
    capped, _ = build_corpus(real_config(max_pairs={"dictionary": 5}))
    extra, stats = build_corpus(real_config(max_pairs={"dictionary": 5}, train_extra={"dictionary": 100}))
    assert extra["valid"] == capped["valid"] and extra["test"] == capped["test"]   # the same evaluation sets
    count = lambda rows: sum(r[2] == "dictionary" for r in rows["train"])
    assert count(extra) > count(capped)
    assert stats["train_extra_after_dedupe"]["dictionary"] == count(extra) - count(capped)
    train_en = {r[0] for r in extra["train"]}
    assert not any(r[0] in train_en for split in ("valid", "test") for r in extra[split])
    assert all(r[3].startswith("train-only ") for r in extra["train"] if r not in capped["train"])
