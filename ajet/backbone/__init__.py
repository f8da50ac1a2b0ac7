"""Backbones run training: `debug` in this process, `swift` and `llamafactory` through their own
frameworks, and any other registered under the entry-point group `ajet.backbones`.
`ajet.backbone.registry` finds them (it imports nothing heavy); `run_backbone` there starts one."""
