"""Layouts as data: what TileLang's layout inference decided (:mod:`.inference`), what it costs in
shared-memory banks (:mod:`.banks`; a kernel's own reads: :mod:`.reads`), pictures of it (:mod:`.plots`) and an explorer widget
(:mod:`.picker`). Everything here runs without a GPU and without nvcc.
"""
from .banks import (AccessPattern, bank_conflicts, bank_map, column_reads, ldmatrix_reads,  # noqa: F401
                    phase_conflict, row_reads)
from .inference import (LayoutInfo, decode, fragment_info, infer_layouts, layouts_text,  # noqa: F401
                        ownership_table, row_major_info, shared_info, swizzled_info)
from .reads import SharedRead, shared_reads  # noqa: F401
from .picker import LayoutPicker, layout_picker, warp_policy  # noqa: F401
from .plots import plot_bank_conflicts, plot_fragment, plot_request_banks, plot_shared_layout, plot_with_tilelang  # noqa: F401
