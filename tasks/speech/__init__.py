"""Speech recognition: CTC over characters on SRU / LSTM encoders, log-mel features, WER/CER."""
from tasks.speech.task import SpeechRecognitionTask

TASK = SpeechRecognitionTask
