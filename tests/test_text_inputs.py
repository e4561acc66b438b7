"""Text pipelines (issue 42): a scikit-learn TF-IDF + logistic regression pipeline converted by skl2onnx
(StringNormalizer → Tokenizer → TfIdfVectorizer → Mul → Normalizer → LinearClassifier, a string
input). A string's size is its value, so the string nodes stay uncosted, said on stdout; the
vectorizer's output is [N, V] whatever the text (shapes/texts.py), so the numeric tail is costed.
verify runs the pipeline on text it makes of the graph's own vocabulary, 16 words a string."""

from __future__ import annotations

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
from onnx_roofline.errors import EXIT_OK  # noqa: E402

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


def test_the_numeric_tail_is_costed_and_the_strings_are_said_uncosted(pipeline, fitted, capsys):
    words = len(fitted.steps[0][1].vocabulary_)  # the vectorizer's width: one column a word
    report = analyze(pipeline, sizing=Sizing(input_shapes={"text": (ROWS, 1)}))
    rows = {node.op_type: node for node in report.nodes}
    assert rows["TfIdfVectorizer"].outputs[0].shape == (ROWS, words)  # [N, V] whatever the tokens (the spec)
    assert {node.op_type for node in report.nodes if node.cost is not None} == {"Mul", "Normalizer", "LinearClassifier"}
    assert rows["Mul"].cost.flops == ROWS * words  # the IDF weights, one multiply an element
    assert (
        rows["LinearClassifier"].cost.flops >= 2 * ROWS * words
    )  # at least its matrix product, one class column (binary)
    assert report.uncosted.count == 5  # Reshape, StringNormalizer, Tokenizer, Flatten, TfIdfVectorizer: strings
    assert main([pipeline, "--input", f"text={ROWS}x1"]) == EXIT_OK
    out = capsys.readouterr().out
    assert (
        "UNCOSTED  5 of 8 nodes uncosted" in out and "string tensor 'text' has no static byte size" in out
    )  # on stdout


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
    assert result.verdict == "incomplete" and not result.comparison.disagreements
    tokens = {size.node: size.run for size in result.sizes}
    assert tokens["Tokenizer"] == (ROWS, 16)  # 16 words a string, each a token of the pattern [a-zA-Z0-9_]+
    checked = {node.op_type for node in result.comparison.nodes if node.outcome in (CHECKED, BOUNDS_ONLY)}
    assert {"Mul", "Normalizer", "LinearClassifier"} <= checked  # the numeric tail, at the run's sizes
