from django.contrib import admin

from .models import Customer, Message, PaymentUpdate

admin.site.register([Customer, Message, PaymentUpdate])
