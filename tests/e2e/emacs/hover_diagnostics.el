;;; hover_diagnostics.el --- Emacs + Eglot (Debian's) as a wavecast client  -*- lexical-binding: t -*-
;; Hover (Eldoc's source, a textDocument/hover request) and Flymake
;; diagnostics after saving. Environment: WAVECAST_BIN, WAVECAST_SAMPLE.
;; Prints "PASS ..." lines; exits 1 on the first failure.

(require 'eglot)
(require 'flymake)
(require 'python)

(defvar wavecast-bin (getenv "WAVECAST_BIN"))
(defvar wavecast-sample (getenv "WAVECAST_SAMPLE"))

(defun wavecast-check (condition message)
  (if condition
      (princ (format "PASS %s\n" message))
    (princ (format "FAIL: %s\n" message))
    (kill-emacs 1)))

(defun wavecast-wait (predicate seconds)
  "Process events until PREDICATE returns non-nil or SECONDS pass; return its value."
  (let ((deadline (+ (float-time) seconds))
        (value nil))
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.05))
    value))

(setq eglot-server-programs
      `((python-mode . (,wavecast-bin "serve" "--gpu" "H100,A100,T4" "--debounce-ms" "50"))))
(setq eglot-sync-connect 10)

(condition-case err
    (progn
      (find-file wavecast-sample)
      (python-mode)
      (apply #'eglot (eglot--guess-contact))
      (wavecast-check (eglot-current-server) "eglot connected to wavecast serve")
      (save-buffer 0)
      (set-buffer-modified-p t)
      (save-buffer 0)
      (let* ((server (eglot-current-server))
             (uri (eglot--path-to-uri (buffer-file-name)))
             (hover
              (wavecast-wait
               (lambda ()
                 (let ((reply (jsonrpc-request server :textDocument/hover
                                               (list :textDocument (list :uri uri)
                                                     :position (list :line 21 :character 10)))))
                   (and reply (plist-get (plist-get reply :contents) :value))))
               180)))
        (wavecast-check hover "hover answered after the save")
        (wavecast-check (string-match-p "| GPU | forward | backward |" hover)
                        "hover shows the per-GPU table")
        (wavecast-check (string-match-p "aten::convolution" hover) "hover lists the line's ops"))
      ;; Break the model provider and save: Flymake gets an error on that line.
      (goto-char (point-min))
      (forward-line 29)
      (delete-region (line-beginning-position) (line-end-position))
      (insert "    return SmallCNN(num_classes=1 // 0)")
      (save-buffer 0)
      (let ((diagnostic
             (wavecast-wait
              (lambda ()
                (seq-find (lambda (d) (eq (flymake-diagnostic-type d) 'eglot-error))
                          (flymake-diagnostics (point-min) (point-max))))
              180)))
        (wavecast-check diagnostic "an error diagnostic arrived after the broken save")
        (wavecast-check (= 30 (line-number-at-pos (flymake-diagnostic-beg diagnostic)))
                        "the diagnostic is on the failing line")
        (wavecast-check (string-match-p "ZeroDivisionError" (flymake-diagnostic-text diagnostic))
                        "the diagnostic names the exception"))
      (eglot-shutdown (eglot-current-server))
      (princ "ALL PASSED\n")
      (kill-emacs 0))
  (error (princ (format "FAIL: %S\n" err))
         (kill-emacs 1)))
