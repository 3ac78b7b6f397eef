"""Where data comes from: one row per loader, decoder, transform or numpy constructor.

Data is not an activation of the model. A waveform, a picture or an array a script builds has
the dtype its library gives it, whatever dtype the model runs in, so it is float32 (or float64,
or uint8) where it meets ops until the code casts it. Each row says what a callable returns,
as its library documents it: the dtype, which item of a returned tuple is the data
(``wav, sr = torchaudio.load(p)``), the keyword that chooses another dtype, and an upper bound
on ``|x|`` where the library states one (a waveform normalised to [-1, 1], pixels scaled to
[0, 1]). Numpy arrays are facts like tensors: ``torch.from_numpy``/``torch.tensor``/
``torch.as_tensor`` keep the array's dtype, so the row of the array's maker decides. A new
source is one line here; :mod:`mpcheck.knowledge.data_api` turns a row into a fact and
:mod:`mpcheck.knowledge.ranges` reads the bounds.
"""

from __future__ import annotations

from typing import NamedTuple


class Source(NamedTuple):
    """What a data source returns: ``dtype`` by default; the tuple ``item`` holding the data
    (None: the value itself); the ``keyword`` that sets another dtype; ``bound`` on |x|."""

    dtype: str
    item: int | None = None
    keyword: str | None = None
    bound: float | None = None
    what: str = "data"  # "data": loaded or decoded; "array": made by numpy's constructors


# By qualified name, as imports resolve it (``import soundfile as sf`` -> ``soundfile.read``).
SOURCES: dict[str, Source] = {
    # torchaudio: (waveform, sample_rate), float32 normalised to [-1, 1] (``normalize=True``)
    "torchaudio.load": Source("float32", item=0, bound=1.0),
    "torchaudio.load_with_torchcodec": Source("float32", item=0, bound=1.0),
    # soundfile: (data, samplerate), a float64 array unless ``dtype=`` ("typically" in
    # [-1, 1] says its docstring: a float file may exceed it, so no bound)
    "soundfile.read": Source("float64", item=0, keyword="dtype"),
    # librosa: (y, sr), ``dtype=np.float32`` by default
    "librosa.load": Source("float32", item=0, keyword="dtype"),
    # torchvision: a PIL image or uint8 array scaled to a float32 tensor in [0, 1]
    "torchvision.transforms.functional.to_tensor": Source("float32", bound=1.0),
    # torchvision: pixels as stored, not scaled
    "torchvision.transforms.functional.pil_to_tensor": Source("uint8"),
    "torchvision.io.read_image": Source("uint8"),
    "torchvision.io.decode_image": Source("uint8"),
    "torchvision.io.decode_jpeg": Source("uint8"),
    "torchvision.io.decode_png": Source("uint8"),
    # OpenCV: a uint8 BGR array (``IMREAD_COLOR``)
    "cv2.imread": Source("uint8"),
    # numpy's constructors: float64, numpy's default float, unless ``dtype=``
    "numpy.zeros": Source("float64", keyword="dtype", what="array"),
    "numpy.ones": Source("float64", keyword="dtype", what="array"),
    "numpy.empty": Source("float64", keyword="dtype", what="array"),
    "numpy.linspace": Source("float64", keyword="dtype", what="array"),
    "numpy.random.rand": Source("float64", what="array", bound=1.0),
    "numpy.random.random": Source("float64", what="array", bound=1.0),
    "numpy.random.randn": Source("float64", what="array"),
    "numpy.random.normal": Source("float64", what="array"),
    "numpy.random.uniform": Source("float64", what="array"),
}

# numpy's dtype names, as ``np.float32``, ``"float32"`` or a Python type (``dtype=float``).
NUMPY_DTYPES: dict[str, str] = {
    **{
        name: name for name in ("float16 float32 float64 uint8 int8 int16 int32 int64 bool".split())
    },
    "half": "float16",
    "single": "float32",
    "double": "float64",
    "float": "float64",  # ``dtype=float``: a Python float is a C double
    "int": "int64",
    "bool_": "bool",
}
# Functions that turn a numpy array into a tensor of the array's dtype.
FROM_NUMPY = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor"})
# ``np.array(img)``/``np.asarray(img)``: an array of a picture's pixels (uint8), or ``dtype=``.
ARRAY_OF = frozenset({"numpy.array", "numpy.asarray", "numpy.ascontiguousarray"})
# Pictures as objects (PIL): what makes one, and the methods that give another picture.
PICTURE_MAKERS = frozenset(
    {"PIL.Image.open", "PIL.Image.new", "PIL.Image.fromarray", "PIL.Image.frombytes"}
)
PICTURE_METHODS = frozenset(
    "convert resize crop rotate transpose copy thumbnail filter point reduce".split()
)


def bounded(bound: float) -> frozenset[str]:
    """The sources returning a tensor whose every element is within ``bound``."""
    return frozenset(n for n, s in SOURCES.items() if s.bound == bound and s.item is None)
