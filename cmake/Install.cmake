# `cmake --install BUILD --prefix P` and `cpack -G DEB`: wavecast in P/bin, its
# private helpers in P/lib/wavecast, the GPU data and the tracer package in
# P/share/wavecast (the layout server/src/install_layout.cpp finds from bin/).
install(TARGETS wavecast RUNTIME DESTINATION ${WAVECAST_INSTALL_BIN_DIR})
install(TARGETS wavecast-worker wavecast-learn RUNTIME DESTINATION ${WAVECAST_INSTALL_HELPER_DIR})
install(DIRECTORY ${WAVECAST_DATA_DIR}/ DESTINATION ${WAVECAST_INSTALL_DATA_DIR})
install(DIRECTORY ${WAVECAST_TRACER_PYTHON_DIR}/wavecast_tracer
        DESTINATION ${WAVECAST_INSTALL_PYTHON_DIR}
        PATTERN __pycache__ EXCLUDE
        PATTERN *.pyc EXCLUDE)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/samples DESTINATION share/wavecast)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/wavecast)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/wavecast/docs)

# The Debian package installs under /usr. dpkg-shlibdeps derives the libraries'
# packages (libc6, libstdc++6, libpython3.11, libtorch1.13 for wavecast-learn);
# torch for the tracer is recommended, not required: a venv may bring it.
set(CPACK_PACKAGE_NAME wavecast)
set(CPACK_PACKAGE_VENDOR wavecast)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "per-line GPU time predictions for PyTorch training scripts, without a GPU")
set(CPACK_PACKAGE_DESCRIPTION "wavecast traces one training iteration of a PyTorch script on \
shape-only tensors and predicts how long each line takes on the GPUs you are choosing between. \
It runs as a command-line tool (wavecast predict) and as a language server (wavecast serve).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "wavecast developers <wavecast@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-torch, python3-torchvision")
# dpkg-shlibdeps comes with dpkg-dev (build-essential depends on it).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
