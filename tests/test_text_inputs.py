"""Text pipelines (issue 42): a scikit-learn TF-IDF + logistic regression pipeline converted by skl2onnx
(StringNormalizer → Tokenizer → TfIdfVectorizer → Mul → Normalizer → LinearClassifier, a string
input). A string's size is its value: every string element counts an average length (100 bytes, or
--string-bytes), said on stdout, and the Tokenizer's tokens a string are bounded by it; the
vectorizer's output is [N, V] whatever the text (shapes/texts.py). verify runs the pipeline on text
it makes of the graph's own vocabulary, 16 words a string, and checks every node."""

from __future__ import annotations

import json

import onnx
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from onnx_roofline import (
    Sizing,
    analyze,  # noqa: E402
)
from onnx_roofline.commands.cli import main  # noqa: E402
from onnx_roofline.commands.verify import verify  # noqa: E402
from onnx_roofline.commands.verify.compare import BOUNDS_ONLY, CHECKED  # noqa: E402
from onnx_roofline.commands.verify.inputs import make_feeds  # noqa: E402
from onnx_roofline.errors import EXIT_OK, EXIT_USAGE  # noqa: E402

ROWS = 8
CORPUS = [
    "the cat sat on the mat",
    "dogs bark at night",
    "a cat and a dog",
    "night falls on the city",
    "the dog sat",
    "city lights at night",
]


@pytest.fixture(scope="module")
def fitted():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(CORPUS * 3, [0, 1, 0, 1, 1, 1] * 3)


@pytest.fixture(scope="module")
def pipeline(fitted, tmp_path_factory) -> str:
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType

    converted = to_onnx(
        fitted,
        initial_types=[("text", StringTensorType([None, 1]))],
        options={id(fitted.steps[-1][1]): {"zipmap": False}},
    )
    path = tmp_path_factory.mktemp("text") / "tfidf.onnx"
    onnx.save(converted, path)
    return str(path)


def _attribute_bytes(model: onnx.ModelProto) -> int:
    """The vectorizer's numeric attributes, each read once: int64 lists 8 B an entry, floats 4 B
    (its pool of strings is no numeric list)."""
    (node,) = [node for node in model.graph.node if node.op_type == "TfIdfVectorizer"]
    return sum(8 * len(a.ints) + 4 * len(a.floats) for a in node.attribute)


@pytest.mark.parametrize("given", [None, 24])
def test_the_strings_are_costed_at_the_length_assumed(pipeline, fitted, given):
    """Every string element counts B bytes (100 by default, a sentence; or --string-bytes), and the
    Tokenizer cuts a string of B bytes into at most B tokens (mincharnum 1, no marks)."""
    length = 100 if given is None else given  # texts.STRING_BYTES: 17.5 words of 4.79 letters and a space
    words = len(fitted.steps[0][1].vocabulary_)  # the vectorizer's width: one column a word
    report = analyze(pipeline, sizing=Sizing(input_shapes={"text": (ROWS, 1)}, string_bytes=given))
    assert report.uncosted.count == 0 and not report.unsupported
    assert (report.model.strings.string_bytes, report.model.strings.given) == (length, given is not None)
    assert report.model.strings.tensors == 5  # text, flattened, normalized, tokenized, flattened1
    rows = {node.op_type: node for node in report.nodes}
    tokens = length // 1  # ⌊B / mincharnum⌋, mincharnum 1 (skl2onnx's) and mark 0
    assert rows["Tokenizer"].outputs[0].shape == (ROWS, tokens) and rows["Tokenizer"].at_most
    assert [bound.rows for bound in report.model.bounds] == [tokens]
    assert rows["Reshape"].cost.bytes == 8  # a view: its [1] int64 shape read, no string moved
    assert rows["Flatten"].cost.bytes == 0
    assert rows["StringNormalizer"].cost.flops == ROWS * length  # LOWER: one op a byte
    assert rows["StringNormalizer"].cost.bytes == 2 * ROWS * length  # the 8 strings read and written
    assert rows["Tokenizer"].cost.flops == ROWS * length  # one scan step a byte
    assert rows["Tokenizer"].cost.bytes == ROWS * length + ROWS * tokens * length  # strings read, tokens written
    vectorizer = rows["TfIdfVectorizer"].cost
    assert vectorizer.flops == ROWS * tokens  # one lookup a unigram (min = max gram length 1), TF: no weighting
    model = onnx.load(pipeline)
    assert vectorizer.bytes_read == ROWS * tokens * length + _attribute_bytes(model)
    assert vectorizer.bytes_written == ROWS * words * 4  # [N, V] float32
    assert rows["Mul"].cost.flops == ROWS * words  # the IDF weights, one multiply an element


def test_the_command_says_the_length_it_assumed(pipeline, capsys):
    assert main([pipeline, "--input", f"text={ROWS}x1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ASSUMED   each string is 100 bytes (the default; --string-bytes B for another): 5 string tensors" in out
    assert "UNCOSTED" not in out and "Tokenizer 'Tokenizer' keeps at most 100 rows" in out
    assert main([pipeline, "--input", f"text={ROWS}x1", "--string-bytes", "24", "--format", "json", "-q"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert document["model"]["strings"] == {"string_bytes": 24, "given": True, "tensors": 5}
    assert all(node["status"] == "ok" for node in document["nodes"])
    with pytest.raises(SystemExit) as refused:
        main([pipeline, "--string-bytes", "0"])
    assert refused.value.code == EXIT_USAGE and "a positive whole number, not 0" in capsys.readouterr().err


def test_verify_runs_the_pipeline_on_text_of_its_own_vocabulary(pipeline):
    model = onnx.load(pipeline)
    vocabulary = {s.decode() for node in model.graph.node if node.op_type == "TfIdfVectorizer"
                  for a in node.attribute if a.name == "pool_strings" for s in a.strings}  # fmt: skip
    assert vocabulary == {
        word for text in CORPUS for word in text.split() if len(word) > 1
    }  # scikit-learn's tokens: 2 letters or more
    texts = make_feeds(model, {}, {"text": (ROWS, 1)}, 0)["text"]
    assert texts.shape == (ROWS, 1) and all(set(text.split()) <= vocabulary for text in texts.reshape(-1))
    result = verify(pipeline, input_shapes={"text": (ROWS, 1)})
    assert result.verdict == "pass" and not result.comparison.disagreements and result.unchecked == ()
    tokens = {size.node: (size.analysis, size.run) for size in result.sizes}
    assert tokens["Tokenizer"] == (
        f"at most {ROWS}x100",
        (ROWS, 16),
    )  # 16 words a string, each a token of the pattern [a-zA-Z0-9_]+; the bound ⌊100 bytes / 1⌋
    checked = {node.op_type for node in result.comparison.nodes if node.outcome in (CHECKED, BOUNDS_ONLY)}
    assert {node.op_type for node in onnx.load(pipeline).graph.node} == checked  # every node, the strings' too


def test_verify_passes_on_the_command_line(pipeline, capsys):
    assert main(["verify", pipeline, "--input", f"text={ROWS}x1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "disagreements: 0" in out and out.splitlines()[-1] == "verdict: PASS"
