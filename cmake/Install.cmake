# `cmake --install BUILD --prefix P` and `cpack -G DEB`: wavecast in P/bin, its
# private helpers in P/lib/wavecast, the GPU data and the tracer package in
# P/share/wavecast (the layout server/src/install_layout.cpp finds from bin/).
#
# Two components, one Debian package each: `wavecast` (everything predict and
# serve need) and `wavecast-learn` (the helper behind `train` and `eval`, the
# only binary that links LibTorch, whose packages come to about 1.2 GB).
set(WAVECAST_MAIN_COMPONENT wavecast)
set(WAVECAST_LEARN_COMPONENT learn)
install(TARGETS wavecast RUNTIME DESTINATION ${WAVECAST_INSTALL_BIN_DIR}
        COMPONENT ${WAVECAST_MAIN_COMPONENT})
install(TARGETS wavecast-worker RUNTIME DESTINATION ${WAVECAST_INSTALL_HELPER_DIR}
        COMPONENT ${WAVECAST_MAIN_COMPONENT})
install(DIRECTORY ${WAVECAST_DATA_DIR}/ DESTINATION ${WAVECAST_INSTALL_DATA_DIR}
        COMPONENT ${WAVECAST_MAIN_COMPONENT})
install(DIRECTORY ${WAVECAST_TRACER_PYTHON_DIR}/wavecast_tracer
        DESTINATION ${WAVECAST_INSTALL_PYTHON_DIR}
        COMPONENT ${WAVECAST_MAIN_COMPONENT}
        PATTERN __pycache__ EXCLUDE
        PATTERN *.pyc EXCLUDE)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/samples DESTINATION share/wavecast
        COMPONENT ${WAVECAST_MAIN_COMPONENT})
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE
              ${CMAKE_SOURCE_DIR}/cmake/debian/copyright
        DESTINATION share/doc/wavecast COMPONENT ${WAVECAST_MAIN_COMPONENT})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/wavecast/docs
        COMPONENT ${WAVECAST_MAIN_COMPONENT})

install(TARGETS wavecast-learn RUNTIME DESTINATION ${WAVECAST_INSTALL_HELPER_DIR}
        COMPONENT ${WAVECAST_LEARN_COMPONENT})
# Debian wants every package's own copyright file.
install(FILES ${CMAKE_SOURCE_DIR}/cmake/debian/copyright DESTINATION share/doc/wavecast-learn
        COMPONENT ${WAVECAST_LEARN_COMPONENT})

# The Debian packages install under /usr. dpkg-shlibdeps derives each package's
# libraries (libc6, libstdc++6, libpython3.11; libtorch1.13 for wavecast-learn
# alone).
set(CPACK_PACKAGE_NAME wavecast)
set(CPACK_PACKAGE_VENDOR wavecast)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL ${WAVECAST_MAIN_COMPONENT} ${WAVECAST_LEARN_COMPONENT})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "wavecast developers <wavecast@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# dpkg-shlibdeps comes with dpkg-dev (build-essential depends on it).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

string(TOUPPER ${WAVECAST_MAIN_COMPONENT} main)
set(CPACK_DEBIAN_${main}_PACKAGE_NAME wavecast)
# Suggested, not recommended: apt installs recommendations by default, and
# python3-torch brings about 560 packages (LibTorch, OpenCV, Qt, a compiler).
# Most users trace with their own venv's torch 2.x; without any torch, predict
# says how to add it.
set(CPACK_DEBIAN_${main}_PACKAGE_SUGGESTS "wavecast-learn, python3-torch, python3-torchvision")
# Each package's first line is its synopsis (CPACK_PACKAGE_DESCRIPTION_SUMMARY
# stays unset: CPack would put it first in both).
set(CPACK_DEBIAN_${main}_DESCRIPTION "per-line GPU time predictions for PyTorch training scripts
wavecast traces one training iteration of a PyTorch script on shape-only
tensors and predicts how long each line takes on the GPUs you are choosing
between, without a GPU. It runs as a command-line tool (wavecast predict)
and as a language server (wavecast serve).")

string(TOUPPER ${WAVECAST_LEARN_COMPONENT} learn)
set(CPACK_DEBIAN_${learn}_PACKAGE_NAME wavecast-learn)
set(CPACK_COMPONENT_${learn}_DEPENDS ${WAVECAST_MAIN_COMPONENT}) # Depends: wavecast (= version)
set(CPACK_DEBIAN_${learn}_DESCRIPTION "wavecast train and wavecast eval, which need LibTorch
The helper behind 'wavecast train', which fits wavecast's learned per-op
models on GPU measurements, and 'wavecast eval', which measures prediction
accuracy on them. Predicting (wavecast predict, wavecast serve) does not
need it.")
include(CPack)
